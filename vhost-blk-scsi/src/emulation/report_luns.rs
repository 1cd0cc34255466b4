//! REPORT LUNS.

use super::cdb::be32;
use super::lun_addr::sam_lun;
use super::sense::Sense;
use super::{Cmd, Target};

pub(crate) fn report_luns(target: &Target, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let c = cmd.cdb;
    let alloc = be32(c, 6) as usize;
    let luns: Vec<u16> = match c[2] {
        // All LUNs (0x00) or all LUNs including well-known ones, of which we have none (0x02).
        0x00 | 0x02 => target.reported_lun_ids().collect(),
        // Well-known LUNs only.
        0x01 => Vec::new(),
        _ => return Err(Sense::invalid_cdb_field(2, Some(7))),
    };
    // SPC-3: an allocation length below 16 is an error.
    if alloc < 16 {
        return Err(Sense::invalid_cdb_field(6, Some(7)));
    }
    let mut d = Vec::with_capacity(8 + 8 * luns.len());
    d.extend_from_slice(&((luns.len() * 8) as u32).to_be_bytes());
    d.extend_from_slice(&[0; 4]);
    for l in luns {
        d.extend_from_slice(&sam_lun(l));
    }
    cmd.data_in.put(&d, alloc);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::cdb::{be32, REPORT_LUNS, TEST_UNIT_READY};
    use super::super::testutil::*;
    use super::super::SenseKey;

    fn rl(select: u8, alloc: u32) -> Vec<u8> {
        let mut c = cdb(REPORT_LUNS, 12);
        c[2] = select;
        c[6..10].copy_from_slice(&alloc.to_be_bytes());
        c
    }

    #[test]
    fn lists_exactly_the_present_luns() {
        let t = target(vec![
            mem_lun(3, 4096, 512),
            mem_lun(1, 4096, 512),
            mem_lun(300, 4096, 512),
        ]);
        // Sent to LUN 0, which is absent: REPORT LUNS still answers.
        let (r, d) = run_in(&t, 0, &rl(0, 4096), 4096);
        assert_good(&r);
        assert_eq!(be32(&d, 0), 24);
        assert_eq!(d.len(), 32);
        assert_eq!(&d[8..16], &[0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&d[16..24], &[0, 3, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&d[24..32], &[0x41, 0x2c, 0, 0, 0, 0, 0, 0]);
        let (r, d) = run_in(&t, 0, &rl(1, 4096), 4096);
        assert_good(&r);
        assert_eq!(be32(&d, 0), 0);
    }

    #[test]
    fn empty_target_and_truncation() {
        let t = target(vec![]);
        let (r, d) = run_in(&t, 0, &rl(0, 16), 16);
        assert_good(&r);
        assert_eq!(d, vec![0; 8]);
        let t = target(vec![mem_lun(0, 4096, 512), mem_lun(1, 4096, 512)]);
        let (r, d) = run_in(&t, 0, &rl(0, 16), 64);
        assert_good(&r);
        assert_eq!(d.len(), 16);
        assert_eq!(be32(&d, 0), 16, "list length is the full length");
    }

    #[test]
    fn listed_absent_luns_are_reported_once_and_answer_absent() {
        use super::super::cdb::INQUIRY;
        use super::super::AbsentQualifier;
        let mut t = target(vec![mem_lun(2, 4096, 512)]);
        // 2 is present: listed once. 300 needs flat addressing.
        t.list_absent_luns([1, 2, 3, 300]);
        let (r, d) = run_in(&t, 0, &rl(0, 4096), 4096);
        assert_good(&r);
        assert_eq!(be32(&d, 0), 32);
        let ids: Vec<[u8; 2]> = d[8..].chunks(8).map(|c| [c[0], c[1]]).collect();
        assert_eq!(ids, vec![[0, 1], [0, 2], [0, 3], [0x41, 0x2c]]);
        // Well-known LUNs only: still none.
        let (_, d) = run_in(&t, 0, &rl(1, 4096), 4096);
        assert_eq!(be32(&d, 0), 0);
        let mut inq = cdb(INQUIRY, 6);
        inq[4] = 36;
        for (q, byte0) in [
            (AbsentQualifier::NotCapable, 0x7f),
            (AbsentQualifier::NotConnected, 0x3f),
        ] {
            t.set_absent_qualifier(q);
            let (r, d) = run_in(&t, 3, &inq, 36);
            assert_good(&r);
            assert_eq!(d[0], byte0, "{q:?}");
            // A present LUN is not affected.
            let (_, d) = run_in(&t, 2, &inq, 36);
            assert_eq!(d[0], 0x00);
            // Anything but INQUIRY / REPORT LUNS / REQUEST SENSE on a listed absent LUN.
            let (r, _) = run_in(&t, 3, &cdb(TEST_UNIT_READY, 6), 0);
            assert_check(&r, SenseKey::IllegalRequest, 0x25, 0x00);
        }
        assert_eq!(
            AbsentQualifier::from_pq(3),
            Some(AbsentQualifier::NotCapable)
        );
        assert_eq!(AbsentQualifier::from_pq(1).map(|q| q.pq()), Some(1));
        assert_eq!(AbsentQualifier::from_pq(0), None);
        assert_eq!(AbsentQualifier::from_pq(2), None);
    }

    #[test]
    fn bad_select_and_short_allocation() {
        let t = target(vec![mem_lun(0, 4096, 512)]);
        let (r, _) = run_in(&t, 0, &rl(0x07, 64), 64);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        let (r, _) = run_in(&t, 0, &rl(0, 8), 64);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
    }
}
