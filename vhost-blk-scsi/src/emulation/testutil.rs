//! Helpers for the target layer's tests: LUNs over RAM or null storage and command runners.

use std::sync::Arc;

use super::*;
use vhost_blk_storage::{IoBuf, StorageSpec};

/// A LUN over a RAM disk of `size` bytes.
pub fn mem_lun(id: u16, size: u64, block_size: u32) -> Lun {
    lun_with(
        id,
        StorageSpec::Mem { size },
        LunOptions {
            block_size,
            ..Default::default()
        },
    )
}

/// A LUN over `spec` with `options`.
pub fn lun_with(id: u16, spec: StorageSpec, options: LunOptions) -> Lun {
    let storage: Arc<dyn vhost_blk_storage::Storage> = spec.open().unwrap();
    Lun::new(id, storage, options, Identity::default_for(0, id)).unwrap()
}

/// Target 0 with the given LUNs.
pub fn target(luns: Vec<Lun>) -> Target {
    let mut t = Target::new(0, ScanLatency::default());
    for l in luns {
        t.insert_lun(l);
    }
    t
}

/// Target 0 with one 1 MiB RAM LUN 0 of `block_size`.
pub fn one_lun(block_size: u32) -> Target {
    target(vec![mem_lun(0, 1 << 20, block_size)])
}

/// Runs a data-in (or no-data) command with a data-in buffer of `in_len` bytes; returns the
/// response and the bytes written.
pub fn run_in(t: &Target, lun: u16, cdb: &[u8], in_len: usize) -> (Response, Vec<u8>) {
    let mut buf = vec![0xeeu8; in_len];
    let resp = t.execute(lun, cdb, &[], &[IoBuf::from(&mut buf[..])]);
    assert!(resp.data_in_len <= in_len);
    buf.truncate(resp.data_in_len);
    (resp, buf)
}

/// Runs a data-out command.
pub fn run_out(t: &Target, lun: u16, cdb: &[u8], out: &[u8]) -> Response {
    let mut out = out.to_vec();
    t.execute(lun, cdb, &[IoBuf::from(&mut out[..])], &[])
}

/// Asserts CHECK CONDITION with this key/ASC/ASCQ and fixed-format sense.
#[track_caller]
pub fn assert_check(resp: &Response, key: SenseKey, asc: u8, ascq: u8) {
    assert_eq!(resp.status, CHECK_CONDITION, "{resp:?}");
    assert_eq!(resp.sense.len(), sense::FIXED_SENSE_LEN);
    assert_eq!(resp.sense[0], 0x70);
    assert_eq!(resp.sense_code(), Some((key as u8, asc, ascq)), "{resp:?}");
    assert_eq!(resp.data_in_len, 0);
}

/// Asserts GOOD status.
#[track_caller]
pub fn assert_good(resp: &Response) {
    assert_eq!(resp.status, GOOD, "{resp:?} sense {:?}", resp.sense_code());
    assert!(resp.sense.is_empty());
}

/// A CDB of `len` bytes with the opcode set.
pub fn cdb(op: u8, len: usize) -> Vec<u8> {
    let mut c = vec![0u8; len];
    c[0] = op;
    c
}
