//! The write log's format (version 1; docs/write-log.md): what [`super::LoggedStorage`] appends
//! and what `vhost-blk-replay` reads back, defined once here.
//!
//! A log is a 32-byte file header, then records in completion order, each a 48-byte record
//! header followed (for a write) by the data. Every integer is little endian.
//!
//! ```text
//! file header   magic "VBWRLOG1" (8) | version u32 = 1 | header_len u32 = 32
//!               | image_size u64 | reserved u64 = 0
//! record        magic u32 = 0x5642_5752 ("RWBV") | kind u32 | seq u64 | offset u64 | len u64
//!               | data_crc u32 | flags u32 = 0 | header_crc u32 | reserved u32 = 0
//!               | data (len bytes, kind WRITE only)
//! ```
//!
//! `kind`: 1 WRITE (len bytes of data follow), 2 FLUSH (offset and len 0), 3 DISCARD,
//! 4 WRITE_ZEROES (a range, no data). `seq` counts records from 0. `data_crc` is the CRC-32C
//! of the data (0 without data), `header_crc` the CRC-32C of the record header's first 40
//! bytes. The reader never panics: a header it does not know is an error; a record cut short
//! (the log of a backend killed while appending) or failing its checksums ends the log there,
//! and the reader says so ([`LogEnd`]).

use std::io::Read;

/// The file header's magic.
pub const MAGIC: [u8; 8] = *b"VBWRLOG1";
/// The format version this code writes and reads.
pub const VERSION: u32 = 1;
/// Bytes of the file header.
pub const HEADER_LEN: usize = 32;
/// A record header's magic.
pub const RECORD_MAGIC: u32 = 0x5642_5752;
/// Bytes of a record header.
pub const RECORD_LEN: usize = 48;
/// Longest write record the reader accepts (a guest request is at most a few MiB).
pub const MAX_DATA: u64 = 64 << 20;

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Write = 1,
    Flush = 2,
    Discard = 3,
    WriteZeroes = 4,
}

impl Kind {
    fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Kind::Write,
            2 => Kind::Flush,
            3 => Kind::Discard,
            4 => Kind::WriteZeroes,
            _ => return None,
        })
    }
}

/// The file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogHeader {
    pub image_size: u64,
}

impl LogHeader {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        put(&mut b, 0, &MAGIC);
        put(&mut b, 8, &VERSION.to_le_bytes());
        put(&mut b, 12, &(HEADER_LEN as u32).to_le_bytes());
        put(&mut b, 16, &self.image_size.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Self, LogError> {
        if b.get(..8) != Some(&MAGIC[..]) {
            return Err(LogError::NotALog);
        }
        let version = u32_at(b, 8);
        if version != VERSION || u32_at(b, 12) as usize != HEADER_LEN {
            return Err(LogError::Version(version));
        }
        Ok(Self {
            image_size: u64_at(b, 16),
        })
    }
}

/// One record's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    pub seq: u64,
    pub offset: u64,
    pub len: u64,
    pub data_crc: u32,
}

impl Record {
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        put(&mut b, 0, &RECORD_MAGIC.to_le_bytes());
        put(&mut b, 4, &(self.kind as u32).to_le_bytes());
        put(&mut b, 8, &self.seq.to_le_bytes());
        put(&mut b, 16, &self.offset.to_le_bytes());
        put(&mut b, 24, &self.len.to_le_bytes());
        put(&mut b, 32, &self.data_crc.to_le_bytes());
        let crc = crc32c(0, b.get(..40).unwrap_or_default());
        put(&mut b, 40, &crc.to_le_bytes());
        b
    }

    /// The header's fields if its magic, kind, checksum and length are sound.
    pub fn decode(b: &[u8; RECORD_LEN]) -> Option<Self> {
        if u32_at(b, 0) != RECORD_MAGIC
            || u32_at(b, 40) != crc32c(0, b.get(..40).unwrap_or_default())
        {
            return None;
        }
        let r = Self {
            kind: Kind::from_u32(u32_at(b, 4))?,
            seq: u64_at(b, 8),
            offset: u64_at(b, 16),
            len: u64_at(b, 24),
            data_crc: u32_at(b, 32),
        };
        r.offset.checked_add(r.len)?;
        let sound = match r.kind {
            Kind::Write => r.len <= MAX_DATA,
            Kind::Flush => r.offset == 0 && r.len == 0 && r.data_crc == 0,
            Kind::Discard | Kind::WriteZeroes => r.data_crc == 0,
        };
        sound.then_some(r)
    }

    /// Bytes of data that follow the header.
    pub fn data_len(&self) -> u64 {
        if self.kind == Kind::Write {
            self.len
        } else {
            0
        }
    }
}

/// Errors of reading a log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("not a vhost-blk write log (bad magic)")]
    NotALog,
    #[error("write log version {0} (this reader knows version {VERSION})")]
    Version(u32),
    #[error("the log is shorter than its header")]
    NoHeader,
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// How a log ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEnd {
    /// After its last record, cleanly.
    Clean,
    /// In a record cut short (a backend killed while appending) at this byte offset.
    Truncated(u64),
    /// At a record that fails its checks (magic, kind, checksum, sequence, length) at this
    /// byte offset.
    Corrupt(u64),
}

/// Reads records one by one from any reader (a file, or the fuzzer's bytes).
pub struct LogReader<R: Read> {
    r: R,
    pub header: LogHeader,
    /// Byte offset of the next record.
    pos: u64,
    next_seq: u64,
    end: Option<LogEnd>,
}

impl<R: Read> LogReader<R> {
    /// Reads and checks the file header.
    pub fn new(mut r: R) -> Result<Self, LogError> {
        let mut b = [0u8; HEADER_LEN];
        if read_full(&mut r, &mut b)? < HEADER_LEN {
            return Err(LogError::NoHeader);
        }
        Ok(Self {
            r,
            header: LogHeader::decode(&b)?,
            pos: HEADER_LEN as u64,
            next_seq: 0,
            end: None,
        })
    }

    /// The next record and its data (empty unless a write), or `None` at the end (then
    /// [`end`](Self::end) says how it ended).
    pub fn next_record(&mut self) -> Result<Option<(Record, Vec<u8>)>, LogError> {
        if self.end.is_some() {
            return Ok(None);
        }
        let mut b = [0u8; RECORD_LEN];
        let n = read_full(&mut self.r, &mut b)?;
        if n == 0 {
            return self.finish(LogEnd::Clean);
        }
        if n < RECORD_LEN {
            return self.finish(LogEnd::Truncated(self.pos));
        }
        let Some(rec) = Record::decode(&b).filter(|r| r.seq == self.next_seq) else {
            return self.finish(LogEnd::Corrupt(self.pos));
        };
        let beyond = rec
            .offset
            .checked_add(rec.len)
            .is_none_or(|e| e > self.header.image_size);
        if beyond {
            return self.finish(LogEnd::Corrupt(self.pos));
        }
        let mut data = Vec::new();
        let want = rec.data_len();
        if want > 0 {
            // Read what is there rather than allocate what the header claims.
            (&mut self.r).take(want).read_to_end(&mut data)?;
            if (data.len() as u64) < want {
                return self.finish(LogEnd::Truncated(self.pos));
            }
            if crc32c(0, &data) != rec.data_crc {
                return self.finish(LogEnd::Corrupt(self.pos));
            }
        }
        self.pos += RECORD_LEN as u64 + want;
        self.next_seq += 1;
        Ok(Some((rec, data)))
    }

    fn finish(&mut self, end: LogEnd) -> Result<Option<(Record, Vec<u8>)>, LogError> {
        self.end = Some(end);
        Ok(None)
    }

    /// How the log ended (once [`next_record`](Self::next_record) returned `None`).
    pub fn end(&self) -> Option<LogEnd> {
        self.end
    }

    /// Byte offset just past the last good record.
    pub fn good_len(&self) -> u64 {
        self.pos
    }

    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.next_seq
    }
}

/// Reads until `b` is full or the input ends; the bytes read.
fn read_full(r: &mut impl Read, b: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < b.len() {
        match r.read(b.get_mut(n..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(at..at + v.len()) {
        d.copy_from_slice(v);
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(b.get(at..at + 4).unwrap_or(&[0; 4]));
    u32::from_le_bytes(v)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(b.get(at..at + 8).unwrap_or(&[0; 8]));
    u64::from_le_bytes(v)
}

/// CRC-32C (Castagnoli, reflected, as iSCSI and ext4 use it), continued from `crc`.
pub fn crc32c(crc: u32, data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82f6_3b78
                } else {
                    c >> 1
                };
                k += 1;
            }
            // A constant evaluation: an index out of range fails the build, not a request.
            #[allow(clippy::indexing_slicing)]
            {
                t[i] = c;
            }
            i += 1;
        }
        t
    };
    !data.iter().fold(!crc, |c, &b| {
        let i = usize::from((c as u8) ^ b);
        (c >> 8) ^ TABLE.get(i).copied().unwrap_or(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(records: &[(Kind, u64, &[u8], u64)]) -> Vec<u8> {
        let mut v = LogHeader {
            image_size: 1 << 20,
        }
        .encode()
        .to_vec();
        for (seq, &(kind, offset, data, len)) in records.iter().enumerate() {
            let r = Record {
                kind,
                seq: seq as u64,
                offset,
                len: if kind == Kind::Write {
                    data.len() as u64
                } else {
                    len
                },
                data_crc: if data.is_empty() { 0 } else { crc32c(0, data) },
            };
            v.extend_from_slice(&r.encode());
            v.extend_from_slice(data);
        }
        v
    }

    fn read_all(b: &[u8]) -> (Vec<Record>, Option<LogEnd>) {
        let mut r = LogReader::new(b).unwrap();
        let mut out = Vec::new();
        while let Some((rec, data)) = r.next_record().unwrap() {
            assert_eq!(data.len() as u64, rec.data_len());
            out.push(rec);
        }
        (out, r.end())
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(0, b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(crc32c(0, b"1234"), b"56789"), 0xe306_9283);
    }

    #[test]
    fn records_round_trip_and_a_cut_tail_is_truncated() {
        let b = log(&[
            (Kind::Write, 512, &[7u8; 1024], 0),
            (Kind::Flush, 0, &[], 0),
            (Kind::Discard, 4096, &[], 4096),
            (Kind::WriteZeroes, 8192, &[], 512),
        ]);
        let (recs, end) = read_all(&b);
        assert_eq!(recs.len(), 4);
        assert_eq!(end, Some(LogEnd::Clean));
        assert_eq!((recs[0].offset, recs[0].len), (512, 1024));
        assert_eq!(recs[1].kind, Kind::Flush);
        // Cut anywhere inside the last two records: the first two stay.
        let second_end = (HEADER_LEN + RECORD_LEN + 1024 + RECORD_LEN) as u64;
        for cut in [
            b.len() - 1,
            b.len() - RECORD_LEN + 1,
            second_end as usize + 3,
        ] {
            let (recs, end) = read_all(&b[..cut]);
            assert!(recs.len() >= 2 && recs.len() < 4, "cut {cut}");
            assert!(
                matches!(end, Some(LogEnd::Truncated(_))),
                "cut {cut}: {end:?}"
            );
        }
        // Cut inside the first write's data.
        let (recs, end) = read_all(&b[..HEADER_LEN + RECORD_LEN + 100]);
        assert!(recs.is_empty());
        assert_eq!(end, Some(LogEnd::Truncated(HEADER_LEN as u64)));
    }

    #[test]
    fn flipped_bits_and_bad_headers_end_the_log_or_are_refused() {
        let b = log(&[(Kind::Write, 0, &[1u8; 512], 0), (Kind::Flush, 0, &[], 0)]);
        // A flipped data byte: the first record fails its data checksum.
        let mut c = b.clone();
        c[HEADER_LEN + RECORD_LEN + 10] ^= 1;
        assert_eq!(read_all(&c), (vec![], Some(LogEnd::Corrupt(32))));
        // A flipped header byte of the second record.
        let mut c = b.clone();
        c[HEADER_LEN + RECORD_LEN + 512 + 5] ^= 1;
        assert_eq!(read_all(&c).0.len(), 1);
        // Out of order: the second record claims seq 5.
        let mut c = log(&[(Kind::Flush, 0, &[], 0), (Kind::Flush, 0, &[], 0)]);
        let r = Record {
            kind: Kind::Flush,
            seq: 5,
            offset: 0,
            len: 0,
            data_crc: 0,
        };
        c[HEADER_LEN + RECORD_LEN..].copy_from_slice(&r.encode());
        assert_eq!(read_all(&c).1, Some(LogEnd::Corrupt(80)));
        // Beyond the image.
        let c = log(&[(Kind::Discard, 1 << 20, &[], 1)]);
        assert!(matches!(read_all(&c).1, Some(LogEnd::Corrupt(_))));
        // File headers.
        assert!(matches!(LogReader::new(&b[..10]), Err(LogError::NoHeader)));
        let mut c = b.clone();
        c[0] = b'X';
        assert!(matches!(LogReader::new(&c[..]), Err(LogError::NotALog)));
        let mut c = b.clone();
        c[8] = 2;
        assert!(matches!(LogReader::new(&c[..]), Err(LogError::Version(2))));
    }

    #[test]
    fn a_huge_claimed_length_allocates_nothing() {
        let mut b = log(&[]);
        let r = Record {
            kind: Kind::Write,
            seq: 0,
            offset: 0,
            len: MAX_DATA + 1,
            data_crc: 1,
        };
        b.extend_from_slice(&r.encode());
        assert!(matches!(read_all(&b).1, Some(LogEnd::Corrupt(_))));
    }
}
