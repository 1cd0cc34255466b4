//! SCSI emulation: a target layer that knows nothing of virtio (nor of settings files), tested
//! on byte buffers.
//!
//! A [`Topology`] holds targets `0..=max_target`; each present [`Target`] holds LUNs, each LUN
//! ([`Lun`]) a [`Storage`]. [`Target::execute`] runs one CDB against one LUN with the
//! initiator's data-out and data-in buffers and returns a [`Response`]: SCSI status,
//! fixed-format sense data, bytes transferred, residual, an overrun flag and an optional
//! completion delay (the scan-latency knob; this layer never sleeps).
//!
//! Commands: TEST UNIT READY, REQUEST SENSE, INQUIRY (standard, VPD 0x00 0x80 0x83 0xB0 0xB1
//! 0xB2), REPORT LUNS, READ CAPACITY(10/16), READ/WRITE(6/10/12/16), VERIFY(10/16),
//! SYNCHRONIZE CACHE(10/16), MODE SENSE(6/10) and MODE SELECT(6/10) (caching page 0x08 with a
//! settable WCE bit, control page 0x0A), START STOP UNIT, UNMAP, WRITE SAME(10/16). Anything
//! else is CHECK CONDITION, ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE.
//!
//! Buffer rules: data returned by a command is truncated to its allocation length and then
//! to the data-in buffers; if it had to be cut by the buffers `overrun` is set. A command whose
//! transfer length (READ, WRITE, VERIFY, WRITE SAME, UNMAP, MODE SELECT) needs more bytes than
//! the buffers hold is not executed: CHECK CONDITION, INVALID FIELD IN CDB at the length field,
//! and `overrun` set (the virtio layer reports VIRTIO_SCSI_S_OVERRUN). A shorter transfer than
//! the buffers leaves a residual.
//!
//! Absent LUNs on a present target: INQUIRY answers the target's [`AbsentQualifier`] (by
//! default peripheral qualifier 011b, 0x7F), REPORT LUNS and REQUEST SENSE work, anything else
//! is LOGICAL UNIT NOT SUPPORTED. REPORT LUNS lists the present LUNs and the target's *listed
//! absent* LUNs ([`Target::list_absent_luns`]): ids a scan then probes and finds empty, as a
//! large SAS topology makes an initiator probe and tear down many devices. Absent targets are
//! the caller's business ([`Topology::target`] returns `None`; virtio answers BAD_TARGET).
//!
//! Every command reads the CDB and its parameter data with checked accesses: indexing and
//! slicing are lint errors in the crate's non-test code (lib.rs; a constant offset into the
//! padded [`cdb::Cdb`] array is checked by the compiler).

mod capacity;
pub mod cdb;
pub mod identity;
mod inquiry;
mod io;
pub mod lun_addr;
mod misc;
mod mode;
mod provisioning;
mod report_luns;
mod rw;
pub mod sense;

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod testutil;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use vhost_blk_storage::{IoBuf, Storage, StorageError};

pub use identity::{
    Identity, IdentityError, LunError, ScanLatency, DEFAULT_PRODUCT, DEFAULT_REVISION,
    DEFAULT_VENDOR, MAX_LUN_ID, MAX_TARGET_ID,
};
pub use lun_addr::{decode_virtio_lun, encode_virtio_lun, LunAddrError, VirtioLun};
pub use sense::{Sense, SenseData, SenseKey, CHECK_CONDITION, GOOD};

use io::DataIn;

/// Largest transfer a READ/WRITE/VERIFY may ask for, in bytes (advertised in VPD 0xB0).
pub const MAX_TRANSFER_BYTES: u64 = 8 << 20;
/// Largest number of blocks one UNMAP may name in total.
pub const MAX_UNMAP_BLOCKS: u32 = 0x0040_0000;
/// Largest number of UNMAP block descriptors in one parameter list.
pub const MAX_UNMAP_DESCRIPTORS: u32 = 256;
/// Largest WRITE SAME, in bytes.
pub const MAX_WRITE_SAME_BYTES: u64 = 1 << 31;

/// The outcome of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// SCSI status: [`GOOD`] or [`CHECK_CONDITION`].
    pub status: u8,
    /// Fixed-format sense data (18 bytes) with CHECK CONDITION, empty otherwise.
    pub sense: SenseData,
    /// Bytes written into the data-in buffers (from their start).
    pub data_in_len: usize,
    /// Bytes of the data-out buffers the command consumed.
    pub data_out_len: usize,
    /// Buffer bytes not transferred (data-in and data-out together), saturated to u32.
    pub residual: u32,
    /// The command wanted to transfer more than the buffers hold.
    pub overrun: bool,
    /// Delay the completion by this much (scan latency); the caller does the waiting.
    pub delay: Option<Duration>,
}

impl Response {
    pub fn is_good(&self) -> bool {
        self.status == GOOD
    }

    /// The sense key/ASC/ASCQ of a CHECK CONDITION, for logs and tests.
    pub fn sense_code(&self) -> Option<(u8, u8, u8)> {
        let s: &[u8] = &self.sense;
        match (s.get(2), s.get(12), s.get(13)) {
            (Some(key), Some(&asc), Some(&ascq)) => Some((key & 0x0f, asc, ascq)),
            _ => None,
        }
    }
}

/// Options of a logical unit other than storage and identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LunOptions {
    pub block_size: u32,
    pub read_only: bool,
    pub thin_provisioning: bool,
    pub write_cache: bool,
}

impl Default for LunOptions {
    fn default() -> Self {
        Self {
            block_size: 512,
            read_only: false,
            thin_provisioning: true,
            write_cache: true,
        }
    }
}

/// Called with the new WCE bit whenever the guest changes it (the device records it where a
/// restarted backend finds it: docs/data-guarantees.md).
pub type WceHook = Arc<dyn Fn(bool) + Send + Sync>;

/// A LUN's [`WceHook`], if any.
#[derive(Default)]
struct WceWatch(std::sync::Mutex<Option<WceHook>>);

impl std::fmt::Debug for WceWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WceWatch")
    }
}

/// One logical unit: a storage seen as blocks, plus identity and mode state.
#[derive(Debug)]
pub struct Lun {
    id: u16,
    storage: Arc<dyn Storage>,
    block_size: u32,
    block_shift: u32,
    blocks: u64,
    read_only: bool,
    thin: bool,
    write_cache: AtomicBool,
    wce_watch: WceWatch,
    identity: Identity,
}

impl Lun {
    /// A LUN over `storage`. The block size must be 512 or 4096 and the storage must hold at
    /// least one block (a trailing partial block is not addressable).
    pub fn new(
        id: u16,
        storage: Arc<dyn Storage>,
        options: LunOptions,
        identity: Identity,
    ) -> Result<Self, LunError> {
        let bs = options.block_size;
        LunError::check(bs, Some(storage.size()))?;
        let blocks = storage.size() / bs as u64;
        Ok(Self {
            id,
            read_only: options.read_only || storage.read_only(),
            storage,
            block_size: bs,
            block_shift: bs.trailing_zeros(),
            blocks,
            thin: options.thin_provisioning,
            write_cache: AtomicBool::new(options.write_cache),
            wce_watch: WceWatch::default(),
            identity,
        })
    }

    pub fn id(&self) -> u16 {
        self.id
    }
    pub fn block_size(&self) -> u32 {
        self.block_size
    }
    /// Number of addressable logical blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }
    pub fn read_only(&self) -> bool {
        self.read_only
    }
    pub fn thin_provisioning(&self) -> bool {
        self.thin
    }
    pub fn identity(&self) -> &Identity {
        &self.identity
    }
    /// The WCE bit of the caching mode page.
    /// Read by a write after it returned, sequentially consistent with MODE SELECT's store
    /// (mode.rs: the mode is stored before the flush that makes it true).
    pub fn write_cache(&self) -> bool {
        self.write_cache.load(Ordering::SeqCst)
    }
    /// The guest changes the WCE bit (MODE SELECT): the hook hears of it.
    pub fn set_write_cache(&self, on: bool) {
        self.write_cache.store(on, Ordering::SeqCst);
        let hook = self
            .wce_watch
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(h) = hook {
            h(on);
        }
    }
    /// The WCE bit restored from a record (no hook call), and the hook for later changes.
    pub fn watch_write_cache(&self, restore: Option<bool>, hook: Option<WceHook>) {
        if let Some(on) = restore {
            self.write_cache.store(on, Ordering::Relaxed);
        }
        *self.wce_watch.0.lock().unwrap_or_else(|e| e.into_inner()) = hook;
    }
    pub(crate) fn storage(&self) -> &dyn Storage {
        &*self.storage
    }

    /// Largest READ/WRITE transfer in blocks.
    pub fn max_transfer_blocks(&self) -> u32 {
        (MAX_TRANSFER_BYTES >> self.block_shift) as u32
    }
    /// Largest WRITE SAME in blocks.
    pub fn max_write_same_blocks(&self) -> u64 {
        MAX_WRITE_SAME_BYTES >> self.block_shift
    }

    /// Byte offset and length of `blocks` blocks at `lba`, or LBA OUT OF RANGE.
    pub(crate) fn byte_range(&self, lba: u64, blocks: u64) -> Result<(u64, u64), Sense> {
        match lba.checked_add(blocks) {
            Some(end) if end <= self.blocks => {
                Ok((lba << self.block_shift, blocks << self.block_shift))
            }
            _ => Err(sense::LBA_OUT_OF_RANGE),
        }
    }

    fn dispatch(&self, op: u8, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
        use cdb::*;
        match op {
            TEST_UNIT_READY => misc::test_unit_ready(cmd),
            START_STOP_UNIT => misc::start_stop_unit(self, cmd),
            READ_6 | READ_10 | READ_12 | READ_16 => rw::read(self, cmd),
            WRITE_6 | WRITE_10 | WRITE_12 | WRITE_16 => rw::write(self, cmd),
            VERIFY_10 | VERIFY_16 => rw::verify(self, cmd),
            SYNCHRONIZE_CACHE_10 | SYNCHRONIZE_CACHE_16 => rw::synchronize_cache(self, cmd),
            READ_CAPACITY_10 => capacity::read_capacity_10(self, cmd),
            SERVICE_ACTION_IN_16 => match cmd.cdb[1] & 0x1f {
                SAI_READ_CAPACITY_16 => capacity::read_capacity_16(self, cmd),
                _ => Err(Sense::invalid_cdb_field(1, Some(4))),
            },
            MODE_SENSE_6 | MODE_SENSE_10 => mode::mode_sense(self, cmd),
            MODE_SELECT_6 | MODE_SELECT_10 => mode::mode_select(self, cmd),
            UNMAP if self.thin => provisioning::unmap(self, cmd),
            WRITE_SAME_10 | WRITE_SAME_16 => provisioning::write_same(self, cmd),
            // Includes ATA PASS-THROUGH(12/16) and REPORT SUPPORTED OPERATION CODES, which
            // Linux probes and copes without.
            _ => Err(sense::INVALID_OPCODE),
        }
    }
}

/// One command in flight: the CDB and the buffers.
pub(crate) struct Cmd<'c, 'a, 'b> {
    /// The CDB, zero-padded ([`cdb::Cdb`]): constant offsets index it without a check.
    pub cdb: &'c cdb::Cdb,
    pub data_out: &'c [IoBuf<'c>],
    pub data_in: DataIn<'a, 'b>,
    /// Data-out bytes the command consumed.
    pub out_used: usize,
    /// Data-out bytes available.
    pub out_len: usize,
    /// The command's transfer did not fit the buffers.
    pub overrun: bool,
}

impl Cmd<'_, '_, '_> {
    /// Fails (and flags the overrun) when the command needs `need` data-out bytes and the
    /// buffers hold fewer. `len_field` is the CDB byte of the length field.
    pub fn need_out(&mut self, need: u64, len_field: u16) -> Result<usize, Sense> {
        if need > self.out_len as u64 {
            self.overrun = true;
            return Err(Sense::invalid_cdb_field(len_field, None));
        }
        Ok(need as usize)
    }

    /// Same for data-in.
    pub fn need_in(&mut self, need: u64, len_field: u16) -> Result<usize, Sense> {
        if need > self.data_in.capacity() as u64 {
            self.overrun = true;
            return Err(Sense::invalid_cdb_field(len_field, None));
        }
        Ok(need as usize)
    }
}

/// Maps a storage failure to sense data; `write` selects WRITE ERROR over UNRECOVERED READ.
pub(crate) fn storage_sense(e: StorageError, write: bool) -> Sense {
    match e {
        StorageError::OutOfRange { .. } => sense::LBA_OUT_OF_RANGE,
        StorageError::ReadOnly => sense::WRITE_PROTECTED,
        e => {
            tracing::warn!(error = %e, "storage I/O failed");
            match (write, e.errno()) {
                // Out of space (or quota) on the host: the thin-provisioned unit cannot
                // allocate the blocks.
                (true, Some(libc::ENOSPC | libc::EDQUOT)) => sense::SPACE_ALLOCATION_FAILED,
                (true, _) => sense::WRITE_ERROR,
                (false, _) => sense::UNRECOVERED_READ_ERROR,
            }
        }
    }
}

/// What standard INQUIRY answers for a LUN that holds no logical unit (byte 0: peripheral
/// qualifier in bits 7-5, device type in bits 4-0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AbsentQualifier {
    /// 011b, type 1Fh (0x7F): the device server cannot support a unit here.
    #[default]
    NotCapable,
    /// 001b, type 1Fh (0x3F): a unit could be here but none is connected.
    NotConnected,
}

impl AbsentQualifier {
    /// From the qualifier's value (3 or 1).
    pub fn from_pq(pq: u8) -> Option<Self> {
        match pq {
            3 => Some(Self::NotCapable),
            1 => Some(Self::NotConnected),
            _ => None,
        }
    }

    /// The qualifier's value (3 or 1).
    pub fn pq(self) -> u8 {
        match self {
            Self::NotCapable => 3,
            Self::NotConnected => 1,
        }
    }

    /// INQUIRY byte 0.
    pub fn byte0(self) -> u8 {
        (self.pq() << 5) | 0x1f
    }
}

/// A target: a set of LUNs (possibly empty), LUN ids REPORT LUNS lists although nothing is
/// there, the qualifier absent LUNs answer with, and its scan latencies.
#[derive(Debug)]
pub struct Target {
    id: u8,
    luns: BTreeMap<u16, Lun>,
    listed_absent: BTreeSet<u16>,
    absent_qualifier: AbsentQualifier,
    latency: ScanLatency,
}

impl Target {
    pub fn new(id: u8, latency: ScanLatency) -> Self {
        Self {
            id,
            luns: BTreeMap::new(),
            listed_absent: BTreeSet::new(),
            absent_qualifier: AbsentQualifier::default(),
            latency,
        }
    }

    /// REPORT LUNS also lists these ids; the ones that hold a LUN are listed once, as present.
    pub fn list_absent_luns(&mut self, ids: impl IntoIterator<Item = u16>) {
        self.listed_absent.extend(ids);
    }

    /// Sets what INQUIRY answers for absent LUNs.
    pub fn set_absent_qualifier(&mut self, q: AbsentQualifier) {
        self.absent_qualifier = q;
    }

    pub fn absent_qualifier(&self) -> AbsentQualifier {
        self.absent_qualifier
    }

    /// The ids REPORT LUNS lists: present and listed-absent LUNs, ascending, each once.
    pub fn reported_lun_ids(&self) -> impl Iterator<Item = u16> + '_ {
        let ids: BTreeSet<u16> = self
            .luns
            .keys()
            .chain(self.listed_absent.iter())
            .copied()
            .collect();
        ids.into_iter()
    }

    pub fn id(&self) -> u8 {
        self.id
    }

    /// Adds a LUN, replacing one with the same id.
    pub fn insert_lun(&mut self, lun: Lun) {
        self.luns.insert(lun.id, lun);
    }

    pub fn lun(&self, id: u16) -> Option<&Lun> {
        self.luns.get(&id)
    }

    /// Present LUN ids, ascending.
    pub fn lun_ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.luns.keys().copied()
    }

    /// Runs `cdb` against LUN `lun` of this target, with the initiator's data-out buffers
    /// (only read) and data-in buffers (written from their start).
    pub fn execute(
        &self,
        lun: u16,
        cdb: &[u8],
        data_out: &[IoBuf<'_>],
        data_in: &[IoBuf<'_>],
    ) -> Response {
        let out_len = io::out_len(data_out);
        let padded = cdb::padded(cdb);
        let mut cmd = Cmd {
            cdb: &padded,
            data_out,
            data_in: DataIn::new(data_in),
            out_used: 0,
            out_len,
            overrun: false,
        };
        let op = cdb.first().copied();
        let result = self.run(lun, cdb, &mut cmd);
        let in_cap = cmd.data_in.capacity();
        let (data_in_len, sense, status) = match result {
            Ok(()) => (cmd.data_in.written(), SenseData::NONE, GOOD),
            Err(s) => {
                tracing::debug!(target = self.id, lun, opcode = ?op, ?s, "check condition");
                (0, SenseData::fixed(&s), CHECK_CONDITION)
            }
        };
        let out_used = if status == GOOD { cmd.out_used } else { 0 };
        let residual = (in_cap - data_in_len).saturating_add(out_len.saturating_sub(out_used));
        Response {
            status,
            sense,
            data_in_len,
            data_out_len: out_used,
            residual: u32::try_from(residual).unwrap_or(u32::MAX),
            overrun: cmd.overrun || cmd.data_in.overrun(),
            delay: op.and_then(|op| self.latency.for_opcode(op)),
        }
    }

    /// `raw` is the CDB as the initiator sent it (its length is checked here), `cmd.cdb` the
    /// same padded.
    fn run(&self, lun: u16, raw: &[u8], cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
        cdb::check_framing(raw)?;
        let op = cmd.cdb[0];
        let unit = self.lun(lun);
        match (op, unit) {
            (cdb::INQUIRY, _) => inquiry::inquiry(unit, self.absent_qualifier, cmd),
            (cdb::REPORT_LUNS, _) => report_luns::report_luns(self, cmd),
            (cdb::REQUEST_SENSE, _) => misc::request_sense(unit.is_some(), cmd),
            (_, None) => Err(sense::LUN_NOT_SUPPORTED),
            (op, Some(unit)) => unit.dispatch(op, cmd),
        }
    }
}

/// Targets `0..=max_target`, some of them absent.
#[derive(Debug)]
pub struct Topology {
    targets: Vec<Option<Target>>,
    scan_latency: ScanLatency,
}

impl Topology {
    /// An empty topology addressing targets `0..=max_target`.
    pub fn new(max_target: u8) -> Self {
        Self {
            targets: (0..=max_target).map(|_| None).collect(),
            scan_latency: ScanLatency::default(),
        }
    }

    /// Sets the scan latency used for commands to absent targets.
    pub fn set_scan_latency(&mut self, latency: ScanLatency) {
        self.scan_latency = latency;
    }

    /// How long to delay the BAD_TARGET answer to `cdb` sent to an absent target (the
    /// topology's scan latency for INQUIRY, REPORT LUNS and TEST UNIT READY).
    pub fn absent_target_delay(&self, cdb: &[u8]) -> Option<Duration> {
        cdb.first().and_then(|&op| self.scan_latency.for_opcode(op))
    }

    /// Adds (or replaces) a target; grows `max_target` if needed.
    pub fn insert(&mut self, target: Target) {
        let i = target.id as usize;
        if self.targets.len() <= i {
            self.targets.resize_with(i + 1, || None);
        }
        if let Some(slot) = self.targets.get_mut(i) {
            *slot = Some(target);
        }
    }

    /// The target with this id, or `None` when it is absent.
    pub fn target(&self, id: u16) -> Option<&Target> {
        self.targets.get(id as usize).and_then(Option::as_ref)
    }

    /// The target and LUN a virtio-scsi LUN field addresses; `None` for bad addressing or an
    /// absent target (both are BAD_TARGET in virtio-scsi). The LUN itself may be absent.
    pub fn resolve(&self, field: &[u8; 8]) -> Option<(&Target, u16)> {
        let a = decode_virtio_lun(field).ok()?;
        Some((self.target(a.target as u16)?, a.lun))
    }

    /// Highest addressable target id (virtio-scsi `max_target`).
    pub fn max_target(&self) -> u16 {
        (self.targets.len() - 1) as u16
    }

    /// Highest LUN id REPORT LUNS lists over all targets (virtio-scsi `max_lun`), 0 if none.
    pub fn max_lun(&self) -> u16 {
        self.targets()
            .filter_map(|t| t.reported_lun_ids().last())
            .max()
            .unwrap_or(0)
    }

    /// Present targets, ascending.
    pub fn targets(&self) -> impl Iterator<Item = &Target> + '_ {
        self.targets.iter().flatten()
    }
}
