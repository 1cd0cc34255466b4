//! Sense data: keys, additional sense codes and the fixed (0x70) and descriptor (0x72) formats.

/// SCSI status GOOD.
pub const GOOD: u8 = 0x00;
/// SCSI status CHECK CONDITION.
pub const CHECK_CONDITION: u8 = 0x02;

/// Length of fixed-format sense data as this target builds it.
pub const FIXED_SENSE_LEN: usize = 18;

/// Sense data as a command returns it: empty (GOOD) or fixed-format, held inline so that
/// answering a command never allocates. Reads as a byte slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenseData {
    bytes: [u8; FIXED_SENSE_LEN],
    len: u8,
}

impl SenseData {
    /// No sense data (status GOOD).
    pub const NONE: SenseData = SenseData {
        bytes: [0; FIXED_SENSE_LEN],
        len: 0,
    };

    /// The fixed-format sense data of `s`.
    pub fn fixed(s: &Sense) -> Self {
        SenseData {
            bytes: s.fixed(),
            len: FIXED_SENSE_LEN as u8,
        }
    }
}

impl std::ops::Deref for SenseData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // `len` is 0 or FIXED_SENSE_LEN (the constructors above).
        self.bytes
            .get(..usize::from(self.len))
            .unwrap_or(&self.bytes)
    }
}

/// Sense keys (SPC-4 table 48).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SenseKey {
    NoSense = 0x0,
    NotReady = 0x2,
    MediumError = 0x3,
    HardwareError = 0x4,
    IllegalRequest = 0x5,
    UnitAttention = 0x6,
    DataProtect = 0x7,
    AbortedCommand = 0xb,
    Miscompare = 0xe,
}

/// Where in the CDB or parameter list an invalid field is (sense-key specific bytes 15..=17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldPointer {
    /// True when the field is in the CDB, false when in the parameter list.
    pub in_cdb: bool,
    /// Byte offset of the field.
    pub byte: u16,
    /// Bit within that byte (the most significant bit of the field), if known.
    pub bit: Option<u8>,
}

/// One sense condition: key, ASC, ASCQ and optionally a field pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sense {
    pub key: SenseKey,
    pub asc: u8,
    pub ascq: u8,
    pub field: Option<FieldPointer>,
}

impl Sense {
    pub const fn new(key: SenseKey, asc: u8, ascq: u8) -> Self {
        Self {
            key,
            asc,
            ascq,
            field: None,
        }
    }

    /// INVALID FIELD IN CDB pointing at `byte` (and `bit` if given).
    pub const fn invalid_cdb_field(byte: u16, bit: Option<u8>) -> Self {
        Self {
            field: Some(FieldPointer {
                in_cdb: true,
                byte,
                bit,
            }),
            ..INVALID_FIELD_IN_CDB
        }
    }

    /// INVALID FIELD IN PARAMETER LIST pointing at `byte` of the parameter list.
    pub const fn invalid_param_field(byte: u16, bit: Option<u8>) -> Self {
        Self {
            field: Some(FieldPointer {
                in_cdb: false,
                byte,
                bit,
            }),
            ..INVALID_FIELD_IN_PARAMETER_LIST
        }
    }

    /// Fixed-format sense data (response code 0x70, current error), 18 bytes.
    pub fn fixed(&self) -> [u8; FIXED_SENSE_LEN] {
        let mut s = [0u8; FIXED_SENSE_LEN];
        s[0] = 0x70;
        s[2] = self.key as u8;
        s[7] = (FIXED_SENSE_LEN - 8) as u8;
        s[12] = self.asc;
        s[13] = self.ascq;
        if let Some(f) = self.field {
            s[15..18].copy_from_slice(&field_pointer_bytes(f));
        }
        s
    }

    /// Descriptor-format sense data (response code 0x72), with a sense-key specific descriptor
    /// when a field pointer is set.
    pub fn descriptor(&self) -> Vec<u8> {
        // Sense key specific descriptor: type 0x02, additional length 6.
        let descriptor = self.field.map(|f| {
            let [a, b, c] = field_pointer_bytes(f);
            [0x02, 0x06, 0, 0, a, b, c, 0]
        });
        let additional = descriptor.map_or(0, |d| d.len()) as u8;
        let mut s = vec![
            0x72,
            self.key as u8,
            self.asc,
            self.ascq,
            0,
            0,
            0,
            additional,
        ];
        s.extend(descriptor.iter().flatten());
        s
    }
}

fn field_pointer_bytes(f: FieldPointer) -> [u8; 3] {
    let mut b0 = 0x80; // SKSV
    if f.in_cdb {
        b0 |= 0x40; // C/D
    }
    if let Some(bit) = f.bit {
        b0 |= 0x08 | (bit & 0x07); // BPV + bit pointer
    }
    let [hi, lo] = f.byte.to_be_bytes();
    [b0, hi, lo]
}

/// NO SENSE, no additional information.
pub const NO_SENSE: Sense = Sense::new(SenseKey::NoSense, 0x00, 0x00);
/// ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE.
pub const INVALID_OPCODE: Sense = Sense::new(SenseKey::IllegalRequest, 0x20, 0x00);
/// ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE.
pub const LBA_OUT_OF_RANGE: Sense = Sense::new(SenseKey::IllegalRequest, 0x21, 0x00);
/// ILLEGAL REQUEST, INVALID FIELD IN CDB.
pub const INVALID_FIELD_IN_CDB: Sense = Sense::new(SenseKey::IllegalRequest, 0x24, 0x00);
/// ILLEGAL REQUEST, LOGICAL UNIT NOT SUPPORTED.
pub const LUN_NOT_SUPPORTED: Sense = Sense::new(SenseKey::IllegalRequest, 0x25, 0x00);
/// ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST.
pub const INVALID_FIELD_IN_PARAMETER_LIST: Sense = Sense::new(SenseKey::IllegalRequest, 0x26, 0x00);
/// ILLEGAL REQUEST, PARAMETER LIST LENGTH ERROR.
pub const PARAMETER_LIST_LENGTH_ERROR: Sense = Sense::new(SenseKey::IllegalRequest, 0x1a, 0x00);
/// ILLEGAL REQUEST, SAVING PARAMETERS NOT SUPPORTED.
pub const SAVING_PARAMETERS_NOT_SUPPORTED: Sense = Sense::new(SenseKey::IllegalRequest, 0x39, 0x00);
/// DATA PROTECT, WRITE PROTECTED.
pub const WRITE_PROTECTED: Sense = Sense::new(SenseKey::DataProtect, 0x27, 0x00);
/// MEDIUM ERROR, UNRECOVERED READ ERROR.
pub const UNRECOVERED_READ_ERROR: Sense = Sense::new(SenseKey::MediumError, 0x11, 0x00);
/// DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (SBC-4 4.7.3.6: a thin-provisioned
/// unit out of space for a write; what QEMU's scsi-disk reports for ENOSPC).
pub const SPACE_ALLOCATION_FAILED: Sense = Sense::new(SenseKey::DataProtect, 0x27, 0x07);
/// MEDIUM ERROR, WRITE ERROR.
pub const WRITE_ERROR: Sense = Sense::new(SenseKey::MediumError, 0x0c, 0x00);
/// MISCOMPARE, MISCOMPARE DURING VERIFY OPERATION.
pub const MISCOMPARE_DURING_VERIFY: Sense = Sense::new(SenseKey::Miscompare, 0x1d, 0x00);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_format_layout() {
        let s = LBA_OUT_OF_RANGE.fixed();
        assert_eq!(s[0], 0x70);
        assert_eq!(s[2], 0x05);
        assert_eq!(s[7], 10);
        assert_eq!((s[12], s[13]), (0x21, 0x00));
        assert_eq!(&s[15..18], &[0, 0, 0]);
    }

    #[test]
    fn field_pointer_in_fixed_and_descriptor_formats() {
        let s = Sense::invalid_cdb_field(258, Some(3));
        let f = s.fixed();
        assert_eq!((f[12], f[13]), (0x24, 0x00));
        assert_eq!(f[15], 0x80 | 0x40 | 0x08 | 3);
        assert_eq!((f[16], f[17]), (1, 2));
        let d = s.descriptor();
        assert_eq!(&d[..4], &[0x72, 0x05, 0x24, 0x00]);
        assert_eq!(d[7] as usize, d.len() - 8);
        assert_eq!(&d[8..10], &[0x02, 0x06]);
        assert_eq!(d[12], f[15]);
        let p = Sense::invalid_param_field(4, None).fixed();
        assert_eq!((p[12], p[15]), (0x26, 0x80));
    }
}
