//! MODE SENSE(6/10) and MODE SELECT(6/10): caching page 0x08 (WCE changeable) and control page
//! 0x0A, plus the short and long LBA block descriptors.

use super::cdb::*;
use super::sense::{self, Sense};
use super::{Cmd, Lun};

const CACHING: u8 = 0x08;
const CONTROL: u8 = 0x0a;
const ALL_PAGES: u8 = 0x3f;
/// WCE bit in byte 2 of the caching page.
const WCE: u8 = 0x04;

/// Page control: which values MODE SENSE reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pc {
    Current,
    Changeable,
    Default,
}

/// A mode page (with its 2-byte header) as reported for `pc`.
fn page(lun: &Lun, code: u8, pc: Pc) -> Option<Vec<u8>> {
    match code {
        CACHING => {
            let mut p = [0u8; 20];
            p[0] = CACHING;
            p[1] = 18;
            p[2] = match pc {
                Pc::Current if lun.write_cache() => WCE,
                Pc::Current => 0,
                Pc::Changeable | Pc::Default => WCE,
            };
            Some(p.to_vec())
        }
        CONTROL => {
            let mut p = [0u8; 12];
            p[0] = CONTROL;
            p[1] = 10;
            if pc != Pc::Changeable {
                p[3] = 0x10; // queue algorithm modifier 1: unrestricted reordering
                p[8..10].copy_from_slice(&0xffffu16.to_be_bytes()); // busy timeout: unlimited
            }
            Some(p.to_vec())
        }
        _ => None,
    }
}

pub(crate) fn mode_sense(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let c = cmd.cdb;
    let ten = c[0] == MODE_SENSE_10;
    reserved_bits(c, 1, if ten { 0xe7 } else { 0xf7 })?;
    let dbd = c[1] & 0x08 != 0;
    let llbaa = ten && c[1] & 0x10 != 0;
    let pc = match c[2] >> 6 {
        0 => Pc::Current,
        1 => Pc::Changeable,
        2 => Pc::Default,
        _ => return Err(sense::SAVING_PARAMETERS_NOT_SUPPORTED),
    };
    let code = c[2] & 0x3f;
    let subpage = c[3];
    let alloc = if ten {
        be16(c, 7) as usize
    } else {
        c[4] as usize
    };
    if ten {
        reserved_zero(c, 4..7)?;
    }
    let pages: Vec<u8> = match (code, subpage) {
        (ALL_PAGES, 0x00 | 0xff) => [CACHING, CONTROL]
            .iter()
            .filter_map(|&p| page(lun, p, pc))
            .flatten()
            .collect(),
        (_, 0x00) => page(lun, code, pc).ok_or(Sense::invalid_cdb_field(2, Some(5)))?,
        _ => return Err(Sense::invalid_cdb_field(3, Some(7))),
    };
    let block_desc = if dbd {
        Vec::new()
    } else if llbaa {
        let mut d = [0u8; 16];
        if pc != Pc::Changeable {
            d[..8].copy_from_slice(&lun.blocks().to_be_bytes());
            d[12..16].copy_from_slice(&lun.block_size().to_be_bytes());
        }
        d.to_vec()
    } else {
        let mut d = [0u8; 8];
        if pc != Pc::Changeable {
            let n = u32::try_from(lun.blocks()).unwrap_or(u32::MAX);
            d[..4].copy_from_slice(&n.to_be_bytes());
            let [_, size @ ..] = lun.block_size().to_be_bytes();
            d[5..8].copy_from_slice(&size);
        }
        d.to_vec()
    };
    let dev_specific = if lun.read_only() { 0x80 } else { 0 } | 0x10; // WP, DPOFUA
    let mut d = Vec::with_capacity(8 + block_desc.len() + pages.len());
    if ten {
        let total = 8 + block_desc.len() + pages.len();
        d.extend_from_slice(&((total - 2) as u16).to_be_bytes());
        d.extend_from_slice(&[0, dev_specific, llbaa as u8, 0]);
        d.extend_from_slice(&(block_desc.len() as u16).to_be_bytes());
    } else {
        let total = 4 + block_desc.len() + pages.len();
        d.extend_from_slice(&[(total - 1) as u8, 0, dev_specific, block_desc.len() as u8]);
    }
    d.extend_from_slice(&block_desc);
    d.extend_from_slice(&pages);
    cmd.data_in.put(&d, alloc);
    Ok(())
}

pub(crate) fn mode_select(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let c = cmd.cdb;
    let ten = c[0] == MODE_SELECT_10;
    reserved_bits(c, 1, 0xee)?;
    let (len, len_field) = if ten {
        reserved_zero(c, 2..7)?;
        (be16(c, 7) as usize, 7)
    } else {
        reserved_zero(c, 2..4)?;
        (c[4] as usize, 4)
    };
    if c[1] & 0x01 != 0 {
        return Err(Sense::invalid_cdb_field(1, Some(0))); // SP: nothing is saved
    }
    if len == 0 {
        return Ok(());
    }
    if c[1] & 0x10 == 0 {
        return Err(Sense::invalid_cdb_field(1, Some(4))); // PF=0: vendor-specific format
    }
    let n = cmd.need_out(len as u64, len_field)?;
    let mut p = vec![0u8; n];
    super::io::gather(cmd.data_out, 0, &mut p);
    let wce = parse_select(lun, &p, ten)?;
    if let Some(on) = wce {
        // Switching the cache off: the new mode is stored first, then what the cache held is
        // written out, so that every write completed so far is as durable as the ones after
        // (docs/data-guarantees.md). In this order a write on another queue either read WCE=1
        // and completed before the store (the flush covers it) or reads WCE=0 and syncs itself.
        let was_on = lun.write_cache();
        lun.set_write_cache(on);
        if !on && was_on {
            lun.storage()
                .flush()
                .map_err(|e| super::storage_sense(e, true))?;
        }
    }
    cmd.out_used = n;
    Ok(())
}

/// Validates a MODE SELECT parameter list; returns the new WCE bit if a caching page was sent.
fn parse_select(lun: &Lun, p: &[u8], ten: bool) -> Result<Option<bool>, Sense> {
    let hdr = if ten { 8 } else { 4 };
    let Some(header) = p.get(..hdr) else {
        return Err(sense::PARAMETER_LIST_LENGTH_ERROR);
    };
    let (bd_len, long) = if ten {
        let long = header.get(4).is_some_and(|b| b & 1 != 0);
        (be16(header, 6) as usize, long)
    } else {
        (header.get(3).copied().unwrap_or(0) as usize, false)
    };
    let desc = if long { 16 } else { 8 };
    if bd_len % desc != 0 {
        return Err(Sense::invalid_param_field(if ten { 6 } else { 3 }, None));
    }
    let Some(descriptors) = p.get(hdr..hdr + bd_len) else {
        return Err(sense::PARAMETER_LIST_LENGTH_ERROR);
    };
    for (i, d) in descriptors.chunks_exact(desc).enumerate() {
        let (bl, field) = if long {
            (be32(d, 12), 12)
        } else {
            (be24(d, 5), 5)
        };
        if bl != 0 && bl != lun.block_size() {
            return Err(Sense::invalid_param_field(
                (hdr + i * desc + field) as u16,
                None,
            ));
        }
    }
    let mut wce = None;
    let mut at = hdr + bd_len;
    let mut rest = p.get(at..).unwrap_or_default();
    while !rest.is_empty() {
        let (new, tail) = mode_page(lun, rest, at)?;
        if new.code == CACHING {
            wce = Some(new.body.first().is_some_and(|b| b & WCE != 0));
        }
        at += 2 + new.body.len();
        rest = tail;
    }
    Ok(wce)
}

/// A mode page of a MODE SELECT parameter list, checked against the page we report.
struct SentPage<'p> {
    code: u8,
    /// The bytes after the page's 2-byte header.
    body: &'p [u8],
}

/// The mode page at the start of `list` (at byte `at` of the parameter list) and the bytes
/// after it. Only the changeable bits of a page we have may differ from their current values.
fn mode_page<'p>(lun: &Lun, list: &'p [u8], at: usize) -> Result<(SentPage<'p>, &'p [u8]), Sense> {
    let Some((&[b0, plen], after)) = list.split_first_chunk::<2>() else {
        return Err(sense::PARAMETER_LIST_LENGTH_ERROR);
    };
    if b0 & 0x40 != 0 {
        return Err(Sense::invalid_param_field(at as u16, Some(6))); // no subpages
    }
    let code = b0 & 0x3f;
    let Some((body, tail)) = after.split_at_checked(usize::from(plen)) else {
        return Err(sense::PARAMETER_LIST_LENGTH_ERROR);
    };
    let (Some(cur), Some(mask)) = (
        page(lun, code, Pc::Current),
        page(lun, code, Pc::Changeable),
    ) else {
        return Err(Sense::invalid_param_field(at as u16, Some(5)));
    };
    let (cur, mask) = (
        cur.get(2..).unwrap_or_default(),
        mask.get(2..).unwrap_or_default(),
    );
    if body.len() != cur.len() {
        return Err(Sense::invalid_param_field(at as u16 + 1, Some(7)));
    }
    for (i, ((&new, &cur), &mask)) in body.iter().zip(cur).zip(mask).enumerate() {
        // Only the caching page's WCE byte (page byte 2) may change.
        let mask = if code == CACHING && i == 0 { mask } else { 0 };
        if (new ^ cur) & !mask != 0 {
            return Err(Sense::invalid_param_field((at + 2 + i) as u16, None));
        }
    }
    Ok((SentPage { code, body }, tail))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{Identity, LunOptions, SenseKey, GOOD};
    use super::*;
    use vhost_blk_storage::StorageSpec;

    fn sense6(dbd: bool, pc: u8, page: u8, alloc: u8) -> Vec<u8> {
        let mut c = cdb(MODE_SENSE_6, 6);
        c[1] = if dbd { 0x08 } else { 0 };
        c[2] = pc << 6 | page;
        c[4] = alloc;
        c
    }

    fn sense10(llbaa: bool, page: u8, alloc: u16) -> Vec<u8> {
        let mut c = cdb(MODE_SENSE_10, 10);
        c[1] = if llbaa { 0x10 } else { 0 };
        c[2] = page;
        c[7..9].copy_from_slice(&alloc.to_be_bytes());
        c
    }

    #[test]
    fn caching_page_reports_wce() {
        let t = one_lun(512);
        let (r, d) = run_in(&t, 0, &sense6(true, 0, CACHING, 255), 255);
        assert_good(&r);
        assert_eq!(d.len(), 4 + 20);
        assert_eq!(d[0] as usize, d.len() - 1);
        assert_eq!(d[2] & 0x10, 0x10, "DPOFUA");
        assert_eq!(d[3], 0);
        assert_eq!(&d[4..6], &[0x08, 0x12]);
        assert_eq!(d[6] & WCE, WCE);
        t.lun(0).unwrap().set_write_cache(false);
        let (_, d) = run_in(&t, 0, &sense6(true, 0, CACHING, 255), 255);
        assert_eq!(d[6] & WCE, 0);
        let (_, d) = run_in(&t, 0, &sense6(true, 1, CACHING, 255), 255);
        assert_eq!(d[6], WCE, "WCE is changeable");
    }

    #[test]
    fn control_page_and_all_pages_with_block_descriptor() {
        let t = one_lun(4096);
        let (r, d) = run_in(&t, 0, &sense6(false, 0, CONTROL, 255), 255);
        assert_good(&r);
        assert_eq!(d[3], 8);
        assert_eq!(be32(&d, 4), 256);
        assert_eq!(be24(&d, 9), 4096);
        assert_eq!(&d[12..14], &[0x0a, 0x0a]);
        assert_eq!(d.len(), 4 + 8 + 12);
        let (r, d) = run_in(&t, 0, &sense6(false, 0, ALL_PAGES, 255), 255);
        assert_good(&r);
        assert_eq!(d.len(), 4 + 8 + 20 + 12);
        assert_eq!(d[12], CACHING);
        assert_eq!(d[32], CONTROL);
        // MODE SENSE(10) with long LBA descriptor.
        let (r, d) = run_in(&t, 0, &sense10(true, ALL_PAGES, 512), 512);
        assert_good(&r);
        assert_eq!(be16(&d, 0) as usize, d.len() - 2);
        assert_eq!(d[4] & 1, 1);
        assert_eq!(be16(&d, 6), 16);
        assert_eq!(be64(&d, 8), 256);
        assert_eq!(be32(&d, 20), 4096);
        assert_eq!(d.len(), 8 + 16 + 32);
        let (_, d) = run_in(&t, 0, &sense10(false, CACHING, 512), 512);
        assert_eq!(be16(&d, 6), 8);
        assert_eq!(d.len(), 8 + 8 + 20);
        // Header only (Linux probes with small allocation lengths).
        let (r, d) = run_in(&t, 0, &sense6(false, 0, ALL_PAGES, 4), 4);
        assert_good(&r);
        assert_eq!(d[0] as usize, 4 + 8 + 32 - 1);
    }

    #[test]
    fn read_only_sets_wp() {
        let t = target(vec![lun_with(
            0,
            StorageSpec::Null { size: 1 << 20 },
            LunOptions {
                read_only: true,
                ..Default::default()
            },
        )]);
        let (_, d) = run_in(&t, 0, &sense6(true, 0, CACHING, 255), 255);
        assert_eq!(d[2] & 0x80, 0x80);
    }

    #[test]
    fn mode_sense_bad_fields() {
        let t = one_lun(512);
        let (r, _) = run_in(&t, 0, &sense6(true, 3, CACHING, 255), 255);
        assert_check(&r, SenseKey::IllegalRequest, 0x39, 0x00);
        let (r, _) = run_in(&t, 0, &sense6(true, 0, 0x1c, 255), 255);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        let mut c = sense6(true, 0, CACHING, 255);
        c[3] = 1;
        let (r, _) = run_in(&t, 0, &c, 255);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        c[3] = 0xff;
        c[2] = ALL_PAGES;
        assert_good(&run_in(&t, 0, &c, 255).0);
    }

    fn select6(params: &[u8]) -> Vec<u8> {
        let mut c = cdb(MODE_SELECT_6, 6);
        c[1] = 0x10;
        c[4] = params.len() as u8;
        c
    }

    #[test]
    fn a_write_racing_with_the_switch_to_write_through_is_flushed() {
        use std::sync::Arc;
        use vhost_blk_storage::probe::ProbeStorage;
        // A WRITE on another queue lands inside the flush of MODE SELECT WCE=0 (the probe runs
        // it when that flush starts). It must then run write-through itself: with the flush
        // before the store, it read WCE=1 and completed with no flush after it.
        let probe = ProbeStorage::new(1 << 20).unwrap();
        let lun = Lun::new(
            0,
            probe.clone(),
            LunOptions::default(),
            Identity::default_for(0, 0),
        );
        let t = Arc::new(target(vec![lun.unwrap()]));
        let (_, mut d) = run_in(&t, 0, &sense6(false, 0, CACHING, 255), 255);
        d[0] = 0;
        d[2] = 0;
        d[12 + 2] &= !WCE;
        let (t2, wrote) = (t.clone(), Arc::new(std::sync::Mutex::new(None)));
        let w = wrote.clone();
        probe.on_next_flush(move || {
            let r = run_out(
                &t2,
                0,
                &super::super::rw::tests::rw_cdb(true, 10, 5, 1),
                &[9; 512],
            );
            *w.lock().unwrap() = Some(r.status);
        });
        assert_good(&run_out(&t, 0, &select6(&d), &d));
        assert_eq!(
            *wrote.lock().unwrap(),
            Some(GOOD),
            "the racing write completed"
        );
        assert!(
            probe.flushed_after_write_at(5 * 512),
            "a write completed after MODE SELECT WCE=0 began was never flushed: {:?}",
            probe.events()
        );
    }

    #[test]
    fn mode_select_toggles_wce() {
        let t = one_lun(512);
        // What Linux sd does: MODE SENSE the caching page, clear WCE, MODE SELECT it back.
        let (_, mut d) = run_in(&t, 0, &sense6(false, 0, CACHING, 255), 255);
        d[0] = 0;
        d[2] = 0;
        d[12 + 2] &= !WCE;
        let r = run_out(&t, 0, &select6(&d), &d);
        assert_good(&r);
        assert!(!t.lun(0).unwrap().write_cache());
        d[12 + 2] |= WCE;
        let mut c = cdb(MODE_SELECT_10, 10);
        c[1] = 0x10;
        let mut p10 = vec![0, 0, 0, 0, 0, 0, 0, 0];
        p10.extend_from_slice(&d[12..]);
        c[7..9].copy_from_slice(&(p10.len() as u16).to_be_bytes());
        assert_good(&run_out(&t, 0, &c, &p10));
        assert!(t.lun(0).unwrap().write_cache());
    }

    #[test]
    fn mode_select_rejects_bad_parameter_lists() {
        let t = one_lun(512);
        let (_, d) = run_in(&t, 0, &sense6(true, 0, ALL_PAGES, 255), 255);
        let base = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut p = d.clone();
            p[0] = 0;
            f(&mut p);
            run_out(&t, 0, &select6(&p), &p)
        };
        assert_good(&base(&|_| {}));
        // Changing a non-changeable field of the control page.
        let r = base(&|p| p[4 + 20 + 3] = 0);
        assert_check(&r, SenseKey::IllegalRequest, 0x26, 0x00);
        // Wrong page length.
        let r = base(&|p| p[5] = 17);
        assert_check(&r, SenseKey::IllegalRequest, 0x26, 0x00);
        // Unknown page.
        let r = base(&|p| p[4] = 0x1c);
        assert_check(&r, SenseKey::IllegalRequest, 0x26, 0x00);
        // Page runs past the list.
        let r = base(&|p| p.truncate(30));
        assert_check(&r, SenseKey::IllegalRequest, 0x1a, 0x00);
        // Block descriptor with another block size.
        let mut p = vec![0, 0, 0, 8, 0, 0, 0x10, 0, 0, 0, 0x10, 0];
        let r = run_out(&t, 0, &select6(&p), &p);
        assert_check(&r, SenseKey::IllegalRequest, 0x26, 0x00);
        p[10] = 0x02; // 512
        assert_good(&run_out(&t, 0, &select6(&p), &p));
        // Header too short, SP set, PF clear, list longer than the data-out.
        let p = [0u8; 2];
        assert_check(
            &run_out(&t, 0, &select6(&p), &p),
            SenseKey::IllegalRequest,
            0x1a,
            0x00,
        );
        let mut c = select6(&[0; 4]);
        c[1] |= 1;
        assert_check(
            &run_out(&t, 0, &c, &[0; 4]),
            SenseKey::IllegalRequest,
            0x24,
            0x00,
        );
        c[1] = 0;
        assert_check(
            &run_out(&t, 0, &c, &[0; 4]),
            SenseKey::IllegalRequest,
            0x24,
            0x00,
        );
        let r = run_out(&t, 0, &select6(&[0; 24]), &[0; 4]);
        assert!(r.overrun);
    }

    /// The parameter list is read with checked accesses (no indexing): a list cut at any byte
    /// is a PARAMETER LIST LENGTH ERROR unless it ends on a page boundary, and an error in the
    /// second page points at its byte in the whole list.
    #[test]
    fn mode_select_list_cut_anywhere_is_a_length_error() {
        let t = one_lun(512);
        let (_, mut full) = run_in(&t, 0, &sense6(false, 0, ALL_PAGES, 255), 255);
        full[0] = 0;
        // Header 4, block descriptor 8, caching page 20, control page 12.
        assert_eq!(full.len(), 4 + 8 + 20 + 12);
        for n in 0..=full.len() {
            let p = &full[..n];
            let r = run_out(&t, 0, &select6(p), p);
            if n == 0 || [12, 32, 44].contains(&n) {
                assert_good(&r);
            } else {
                assert_check(&r, SenseKey::IllegalRequest, 0x1a, 0x00);
            }
        }
        // The control page's queue algorithm modifier (page byte 3) is not changeable.
        let at = 4 + 8 + 20 + 3;
        full[at] = 0;
        let r = run_out(&t, 0, &select6(&full), &full);
        assert_check(&r, SenseKey::IllegalRequest, 0x26, 0x00);
        let pointer = u16::from_be_bytes([r.sense[16], r.sense[17]]);
        assert_eq!((r.sense[15] & 0xc0, usize::from(pointer)), (0x80, at));
    }
}
