//! Tests of the dispatch, topology and robustness against random guest input.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::cdb::*;
use super::testutil::*;
use super::*;
use vhost_blk_storage::IoBuf;

#[test]
fn unsupported_opcodes_are_invalid_operation_code() {
    let t = one_lun(512);
    for (op, len) in [
        (ATA_PASS_THROUGH_16, 16),
        (ATA_PASS_THROUGH_12, 12),
        (MAINTENANCE_IN, 12),
        (0x4d, 10), // LOG SENSE
        (0xc0, 16), // vendor specific
        (0x7f, 32), // variable length
    ] {
        let mut c = cdb(op, len);
        if op == MAINTENANCE_IN {
            c[1] = 0x0c; // REPORT SUPPORTED OPERATION CODES
        }
        let (r, _) = run_in(&t, 0, &c, 512);
        assert_check(&r, SenseKey::IllegalRequest, 0x20, 0x00);
    }
    let (r, _) = run_in(&t, 0, &[], 16);
    assert_check(&r, SenseKey::IllegalRequest, 0x20, 0x00);
}

/// A CDB shorter than its operation code's group is INVALID FIELD IN CDB at its first missing
/// byte, for every operation code, whatever the bytes it has: the commands read a zero-padded
/// copy and never run on one.
#[test]
fn short_cdb_of_every_opcode_points_at_its_first_missing_byte() {
    let t = one_lun(512);
    for op in 0..=u8::MAX {
        let Some(need) = cdb_len(op) else { continue };
        for len in 1..need {
            let mut c = vec![0xffu8; len];
            c[0] = op;
            let (r, _) = run_in(&t, 0, &c, 512);
            assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
            let pointer = u16::from_be_bytes([r.sense[16], r.sense[17]]);
            assert_eq!(usize::from(pointer), len, "opcode {op:#04x}, {len} bytes");
        }
    }
}

#[test]
fn naca_and_link_bits_in_control_byte() {
    let t = one_lun(512);
    let mut c = cdb(TEST_UNIT_READY, 6);
    c[5] = 0x04;
    assert_check(
        &run_in(&t, 0, &c, 0).0,
        SenseKey::IllegalRequest,
        0x24,
        0x00,
    );
    c[5] = 0x01;
    assert_check(
        &run_in(&t, 0, &c, 0).0,
        SenseKey::IllegalRequest,
        0x24,
        0x00,
    );
    c[5] = 0xc0; // vendor bits are fine
    assert_good(&run_in(&t, 0, &c, 0).0);
}

#[test]
fn absent_lun_answers_only_scan_commands() {
    let t = one_lun(512);
    for (op, len) in [
        (READ_10, 10),
        (READ_CAPACITY_10, 10),
        (MODE_SENSE_6, 6),
        (ATA_PASS_THROUGH_16, 16),
    ] {
        let (r, _) = run_in(&t, 9, &cdb(op, len), 512);
        assert_check(&r, SenseKey::IllegalRequest, 0x25, 0x00);
    }
    let mut inq = cdb(INQUIRY, 6);
    inq[4] = 96;
    let (r, d) = run_in(&t, 9, &inq, 96);
    assert_good(&r);
    assert_eq!(d[0], 0x7f);
}

#[test]
fn topology_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Topology>();
}

/// A random CDB: mostly known opcodes with random fields, sometimes garbage, random length.
fn random_cdb(rng: &mut ChaCha8Rng) -> Vec<u8> {
    const OPS: [u8; 30] = [
        TEST_UNIT_READY,
        REQUEST_SENSE,
        READ_6,
        WRITE_6,
        INQUIRY,
        MODE_SELECT_6,
        MODE_SENSE_6,
        START_STOP_UNIT,
        READ_CAPACITY_10,
        READ_10,
        WRITE_10,
        VERIFY_10,
        SYNCHRONIZE_CACHE_10,
        WRITE_SAME_10,
        UNMAP,
        MODE_SELECT_10,
        MODE_SENSE_10,
        ATA_PASS_THROUGH_16,
        READ_16,
        WRITE_16,
        VERIFY_16,
        SYNCHRONIZE_CACHE_16,
        WRITE_SAME_16,
        SERVICE_ACTION_IN_16,
        REPORT_LUNS,
        ATA_PASS_THROUGH_12,
        MAINTENANCE_IN,
        READ_12,
        WRITE_12,
        0x7f,
    ];
    let len = match rng.gen_range(0..10) {
        0 => rng.gen_range(0..6),
        1..=7 => 32,
        _ => rng.gen_range(0..=32),
    };
    let mut c: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
    if len > 0 && rng.gen_bool(0.9) {
        c[0] = OPS[rng.gen_range(0..OPS.len())];
    }
    // Make clean flags, small in-range transfers and clean control bytes common, so that
    // commands get past the field checks.
    if len > 0 && rng.gen_bool(0.85) {
        let n = cdb_len(c[0]).unwrap_or(len).min(len);
        if n > 1 && rng.gen_bool(0.85) {
            c[1] = if c[0] == SERVICE_ACTION_IN_16 {
                SAI_READ_CAPACITY_16
            } else {
                0
            };
        }
        for b in c.iter_mut().take(n).skip(2) {
            if rng.gen_bool(0.95) {
                *b = 0;
            }
        }
        let len_at = match n {
            6 => Some(4),
            10 => Some(8),
            12 => Some(9),
            16 => Some(13),
            _ => None,
        };
        if let Some(at) = len_at {
            c[n - 1] = 0;
            c[at] = rng.gen_range(0..24);
        }
    }
    c
}

fn random_bufs(rng: &mut ChaCha8Rng) -> Vec<Vec<u8>> {
    let n = rng.gen_range(0..4);
    (0..n)
        .map(|_| {
            let len = match rng.gen_range(0..4) {
                0 => rng.gen_range(0..16),
                1 => rng.gen_range(0..600),
                2 => 512 * rng.gen_range(0..9),
                _ => rng.gen_range(0..5000),
            };
            vec![rng.gen::<u8>(); len]
        })
        .collect()
}

#[test]
fn random_cdbs_never_panic_or_overrun_buffers() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5c51_7a67);
    let t = target(vec![mem_lun(0, 64 << 10, 512), mem_lun(1, 64 << 10, 4096)]);
    let mut good = 0;
    let mut good_ops = std::collections::BTreeSet::new();
    for i in 0..10_000 {
        let c = random_cdb(&mut rng);
        let mut out = random_bufs(&mut rng);
        let mut inb = random_bufs(&mut rng);
        let guard: Vec<Vec<u8>> = inb.clone();
        let out_guard: Vec<Vec<u8>> = out.clone();
        let in_cap: usize = inb.iter().map(Vec::len).sum();
        let out_cap: usize = out.iter().map(Vec::len).sum();
        let lun = [0u16, 1, 0, 1, 0, 1, 0, 1, 2, 16383][rng.gen_range(0..10)];
        let out_slices: Vec<IoBuf<'_>> = out.iter_mut().map(|b| IoBuf::from(&mut b[..])).collect();
        let in_slices: Vec<IoBuf<'_>> = inb.iter_mut().map(|b| IoBuf::from(&mut b[..])).collect();
        let r = t.execute(lun, &c, &out_slices, &in_slices);
        drop((in_slices, out_slices));
        assert_eq!(out, out_guard, "case {i}: data-out buffers were written");
        assert!(r.data_in_len <= in_cap, "case {i}: {c:02x?} {r:?}");
        assert!(
            r.residual as usize <= in_cap + out_cap,
            "case {i}: {c:02x?} {r:?}"
        );
        match r.status {
            GOOD => {
                assert!(r.sense.is_empty());
                good += 1;
                good_ops.insert(c[0]);
            }
            CHECK_CONDITION => {
                assert_eq!(r.sense.len(), 18);
                assert_eq!(r.sense[0], 0x70);
                assert_eq!(r.data_in_len, 0);
            }
            s => panic!("case {i}: unexpected status {s:#x}"),
        }
        // Bytes past data_in_len are untouched.
        let mut pos = 0;
        for (b, g) in inb.iter().zip(&guard) {
            for k in 0..b.len() {
                if pos + k >= r.data_in_len {
                    assert_eq!(
                        b[k],
                        g[k],
                        "case {i}: byte {} past data_in_len changed",
                        pos + k
                    );
                }
            }
            pos += b.len();
        }
    }
    // The generator reaches past the checks often enough to mean something.
    eprintln!("{good} of 10000 random commands succeeded, opcodes {good_ops:02x?}");
    assert!(good > 500, "only {good} commands succeeded");
    assert!(good_ops.len() >= 20, "only {good_ops:02x?} ever succeeded");
}

#[test]
fn storage_failure_is_medium_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.img");
    let spec = vhost_blk_storage::StorageSpec::File {
        path: path.clone(),
        create_size: Some(1 << 20),
        direct: false,
        read_only: false,
    };
    let t = target(vec![lun_with(0, spec, LunOptions::default())]);
    let mut c = cdb(READ_10, 10);
    c[8] = 1;
    assert_good(&run_in(&t, 0, &c, 512).0);
    // The image shrinks under the LUN: the read fails for real.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    let (r, _) = run_in(&t, 0, &c, 512);
    assert_check(&r, SenseKey::MediumError, 0x11, 0x00);
}

#[test]
fn write_errors_map_to_sbc_sense_codes() {
    use vhost_blk_storage::StorageError;
    let io = |n| StorageError::Io(std::io::Error::from_raw_os_error(n));
    let code = |s: Sense| (s.key as u8, s.asc, s.ascq);
    // Out of space: DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (SBC-4; QEMU's choice).
    assert_eq!(
        code(storage_sense(io(libc::ENOSPC), true)),
        (0x07, 0x27, 0x07)
    );
    let sticky = StorageError::Failed {
        errno: libc::ENOSPC,
    };
    assert_eq!(code(storage_sense(sticky, true)), (0x07, 0x27, 0x07));
    // EIO, and a sticky EIO on a later flush: MEDIUM ERROR, WRITE ERROR.
    assert_eq!(code(storage_sense(io(libc::EIO), true)), (0x03, 0x0c, 0x00));
    let sticky = StorageError::Failed { errno: libc::EIO };
    assert_eq!(code(storage_sense(sticky, true)), (0x03, 0x0c, 0x00));
    assert_eq!(
        code(storage_sense(io(libc::EIO), false)),
        (0x03, 0x11, 0x00)
    );
}
