//! TEST UNIT READY, REQUEST SENSE and START STOP UNIT.

use super::cdb::{reserved_bits, reserved_zero};
use super::sense::{self, Sense};
use super::{storage_sense, Cmd, Lun};

pub(crate) fn test_unit_ready(cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    reserved_zero(cmd.cdb, 1..5)
}

/// No deferred sense is kept, so a present LUN reports NO SENSE; an absent one LOGICAL UNIT
/// NOT SUPPORTED (as data, with GOOD status).
pub(crate) fn request_sense(present: bool, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let c = cmd.cdb;
    reserved_bits(c, 1, 0xfe)?;
    reserved_zero(c, 2..4)?;
    let s = if present {
        sense::NO_SENSE
    } else {
        sense::LUN_NOT_SUPPORTED
    };
    let data = if c[1] & 1 != 0 {
        s.descriptor()
    } else {
        s.fixed().to_vec()
    };
    cmd.data_in.put(&data, c[4] as usize);
    Ok(())
}

pub(crate) fn start_stop_unit(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let c = cmd.cdb;
    reserved_bits(c, 1, 0xfe)?;
    reserved_zero(c, 2..3)?;
    reserved_bits(c, 3, 0xf0)?;
    reserved_bits(c, 4, 0x08)?;
    if c[4] & 0x02 != 0 {
        // LOEJ: the medium is not removable.
        return Err(Sense::invalid_cdb_field(4, Some(1)));
    }
    let start = c[4] & 1 != 0;
    let no_flush = c[4] & 0x04 != 0;
    let power_condition = c[4] >> 4;
    if !start && !no_flush && power_condition == 0 {
        lun.storage().flush().map_err(|e| storage_sense(e, true))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::cdb::*;
    use super::super::testutil::*;
    use super::super::SenseKey;

    #[test]
    fn tur_good_and_reserved_bytes_checked() {
        let t = one_lun(512);
        let (r, _) = run_in(&t, 0, &cdb(TEST_UNIT_READY, 6), 0);
        assert_good(&r);
        assert_eq!(r.residual, 0);
        let mut c = cdb(TEST_UNIT_READY, 6);
        c[2] = 1;
        let (r, _) = run_in(&t, 0, &c, 0);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        let (r, _) = run_in(&t, 1, &cdb(TEST_UNIT_READY, 6), 0);
        assert_check(&r, SenseKey::IllegalRequest, 0x25, 0x00);
    }

    #[test]
    fn request_sense_reports_no_sense() {
        let t = one_lun(512);
        let mut c = cdb(REQUEST_SENSE, 6);
        c[4] = 252;
        let (r, d) = run_in(&t, 0, &c, 252);
        assert_good(&r);
        assert_eq!(d.len(), 18);
        assert_eq!((d[0], d[2], d[7], d[12], d[13]), (0x70, 0, 10, 0, 0));
        c[1] = 1; // DESC
        let (r, d) = run_in(&t, 0, &c, 252);
        assert_good(&r);
        assert_eq!(&d, &[0x72, 0, 0, 0, 0, 0, 0, 0]);
        c[1] = 0;
        let (r, d) = run_in(&t, 5, &c, 252);
        assert_good(&r);
        assert_eq!((d[2], d[12]), (0x05, 0x25));
        c[4] = 8;
        let (_, d) = run_in(&t, 0, &c, 252);
        assert_eq!(d.len(), 8);
    }

    #[test]
    fn start_stop_unit() {
        let t = one_lun(512);
        let mut c = cdb(START_STOP_UNIT, 6);
        c[4] = 1;
        assert_good(&run_in(&t, 0, &c, 0).0);
        c[4] = 0;
        assert_good(&run_in(&t, 0, &c, 0).0);
        c[1] = 1; // IMMED
        assert_good(&run_in(&t, 0, &c, 0).0);
        c[4] = 0x02; // LOEJ
        assert_check(
            &run_in(&t, 0, &c, 0).0,
            SenseKey::IllegalRequest,
            0x24,
            0x00,
        );
    }
}
