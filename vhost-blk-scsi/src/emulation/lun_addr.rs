//! LUN addressing: the virtio-scsi 8-byte LUN field and SAM single-level LUN encodings.
//!
//! virtio-scsi: byte 0 = 1, byte 1 = target, bytes 2..=3 = LUN in peripheral (method 00b,
//! bus 0, LUN < 256) or flat space (method 01b, 14-bit LUN) addressing, bytes 4..=7 = 0.

/// A decoded virtio-scsi LUN field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VirtioLun {
    pub target: u8,
    pub lun: u16,
}

/// Why a LUN field does not address anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LunAddrError {
    #[error("first byte of the LUN field is {0:#04x}, not 1")]
    BadFirstByte(u8),
    #[error("unsupported LUN address method {0}")]
    AddressMethod(u8),
    #[error("peripheral device addressing with bus {0} (only bus 0 exists)")]
    Bus(u8),
    #[error("second-level LUN {0:#018x} is not supported")]
    SecondLevel(u64),
}

/// Decodes the 8-byte virtio-scsi LUN field.
pub fn decode_virtio_lun(field: &[u8; 8]) -> Result<VirtioLun, LunAddrError> {
    if field[0] != 1 {
        return Err(LunAddrError::BadFirstByte(field[0]));
    }
    let target = field[1];
    let lun = decode_single_level(field[2], field[3])?;
    let rest = u32::from_be_bytes([field[4], field[5], field[6], field[7]]);
    if rest != 0 {
        return Err(LunAddrError::SecondLevel(u64::from_be_bytes(*field)));
    }
    Ok(VirtioLun { target, lun })
}

fn decode_single_level(b0: u8, b1: u8) -> Result<u16, LunAddrError> {
    match b0 >> 6 {
        0b00 if b0 & 0x3f == 0 => Ok(b1 as u16),
        0b00 => Err(LunAddrError::Bus(b0 & 0x3f)),
        0b01 => Ok(u16::from_be_bytes([b0 & 0x3f, b1])),
        m => Err(LunAddrError::AddressMethod(m)),
    }
}

/// Encodes `target:lun` as a virtio-scsi LUN field the way Linux does (flat space addressing).
pub fn encode_virtio_lun(target: u8, lun: u16) -> [u8; 8] {
    let [hi, lo] = (lun & 0x3fff).to_be_bytes();
    [1, target, 0x40 | hi, lo, 0, 0, 0, 0]
}

/// The 8-byte SAM LUN REPORT LUNS lists: peripheral addressing below 256, flat space above.
pub fn sam_lun(lun: u16) -> [u8; 8] {
    if lun < 256 {
        [0, lun as u8, 0, 0, 0, 0, 0, 0]
    } else {
        let [hi, lo] = (lun & 0x3fff).to_be_bytes();
        [0x40 | hi, lo, 0, 0, 0, 0, 0, 0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_peripheral_form() {
        for (t, l) in [(0u8, 0u16), (3, 1), (255, 255), (7, 256), (1, 16383)] {
            let f = encode_virtio_lun(t, l);
            assert_eq!(decode_virtio_lun(&f), Ok(VirtioLun { target: t, lun: l }));
        }
        assert_eq!(
            decode_virtio_lun(&[1, 2, 0, 9, 0, 0, 0, 0]),
            Ok(VirtioLun { target: 2, lun: 9 })
        );
    }

    #[test]
    fn bad_addressing_is_typed() {
        assert_eq!(
            decode_virtio_lun(&[0, 0, 0x40, 0, 0, 0, 0, 0]),
            Err(LunAddrError::BadFirstByte(0))
        );
        assert_eq!(
            decode_virtio_lun(&[1, 0, 0x80, 0, 0, 0, 0, 0]),
            Err(LunAddrError::AddressMethod(2))
        );
        assert_eq!(
            decode_virtio_lun(&[1, 0, 0xc1, 0, 0, 0, 0, 0]),
            Err(LunAddrError::AddressMethod(3))
        );
        assert_eq!(
            decode_virtio_lun(&[1, 0, 0x05, 0, 0, 0, 0, 0]),
            Err(LunAddrError::Bus(5))
        );
        assert!(matches!(
            decode_virtio_lun(&[1, 0, 0x40, 0, 0, 1, 0, 0]),
            Err(LunAddrError::SecondLevel(_))
        ));
    }

    #[test]
    fn sam_encoding() {
        assert_eq!(sam_lun(5), [0, 5, 0, 0, 0, 0, 0, 0]);
        assert_eq!(sam_lun(0x1234), [0x52, 0x34, 0, 0, 0, 0, 0, 0]);
    }
}
