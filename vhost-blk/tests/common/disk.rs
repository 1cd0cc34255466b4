//! One queue of either personality as a disk of 512-byte sectors: write, flush, read, and
//! the cache-mode switch, for the data-guarantee tests (power loss, write errors, kills).

use std::sync::Arc;
use std::time::Duration;

use vhost_blk_frontend::scsi::FIRST_REQUEST_QUEUE;
use vhost_blk_frontend::{
    scsi_connect_options, BlkRequest, ConnectOptions, Connection, QueueHandle, ScsiRequest,
};

pub const T: Duration = Duration::from_secs(60);

/// Which device the backend runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Blk,
    Scsi,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Blk => "blk",
            Kind::Scsi => "scsi",
        }
    }

    /// Backend arguments choosing the device.
    pub fn args(self) -> Vec<String> {
        match self {
            Kind::Blk => vec![],
            Kind::Scsi => vec!["--device".into(), "scsi".into()],
        }
    }

    /// Backend arguments for a 1 MiB image at `img` with `queues` request queues, O_DIRECT or
    /// not, the write cache off or on, and a test fault (`--test-fault`) if given.
    pub fn image_args(
        self,
        img: &std::path::Path,
        queues: usize,
        (direct, write_through): (bool, bool),
        fault: Option<&str>,
    ) -> Vec<String> {
        let mut args = self.args();
        let img = img.to_str().unwrap().to_string();
        args.extend(["--image".into(), img, "--size".into(), "1M".into()]);
        args.extend(["--num-queues".into(), queues.to_string()]);
        if direct {
            args.push("--direct".into());
        }
        if write_through {
            args.push("--writethrough".into());
        }
        if let Some(f) = fault {
            args.extend(["--test-fault".into(), f.into()]);
        }
        args
    }

    /// Connects with `queues` request queues.
    pub fn connect(self, socket: &std::path::Path, queues: u16) -> Connection {
        let opts = match self {
            Kind::Blk => ConnectOptions {
                num_queues: queues,
                ..ConnectOptions::default()
            },
            Kind::Scsi => scsi_connect_options(queues),
        };
        Connection::connect(socket, &opts).unwrap()
    }

    /// The vring index of the first request queue.
    pub fn first_queue(self) -> usize {
        if self == Kind::Blk {
            0
        } else {
            FIRST_REQUEST_QUEUE
        }
    }

    /// Request queue `i` of `conn` as a disk.
    pub fn queue(self, conn: &mut Connection, i: usize) -> QueueDisk {
        let first = if self == Kind::Blk {
            0
        } else {
            FIRST_REQUEST_QUEUE
        };
        let q = conn.take_queue(first + i).unwrap();
        let slot = Slot::new(self, &q.ram.clone());
        QueueDisk { q, slot }
    }
}

enum Req {
    Blk(BlkRequest),
    Scsi(ScsiRequest),
}

/// How a request ended: virtio-blk's status byte, or SCSI status and sense.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub ok: bool,
    /// (key, ASC, ASCQ) for SCSI CHECK CONDITION.
    pub sense: Option<(u8, u8, u8)>,
    /// virtio-blk status byte (0 OK, 1 IOERR, 2 UNSUPP), or SCSI status.
    pub code: u8,
}

/// One request's buffers in guest memory, of either personality (reusable).
pub struct Slot(Req);

impl Slot {
    pub fn new(kind: Kind, ram: &Arc<vhost_blk_frontend::GuestRam>) -> Self {
        Slot(match kind {
            Kind::Blk => Req::Blk(BlkRequest::new(ram, 64 * 1024).unwrap()),
            Kind::Scsi => Req::Scsi(ScsiRequest::new(ram, 64 * 1024).unwrap()),
        })
    }

    /// Prepares a write of `data` (whole sectors) at `sector`.
    pub fn write(&mut self, sector: u64, data: &[u8]) -> &mut Self {
        match &mut self.0 {
            Req::Blk(r) => {
                r.write(sector, data).unwrap();
            }
            Req::Scsi(r) => {
                r.write16(sector, data).unwrap();
            }
        }
        self
    }

    /// Prepares a FLUSH / SYNCHRONIZE CACHE(10) of the whole disk.
    pub fn flush(&mut self) -> &mut Self {
        match &mut self.0 {
            Req::Blk(r) => {
                r.flush().unwrap();
            }
            Req::Scsi(r) => {
                r.synchronize_cache(0, 0).unwrap();
            }
        }
        self
    }

    /// Prepares a read of `len` bytes at `sector`.
    pub fn read(&mut self, sector: u64, len: u32) -> &mut Self {
        match &mut self.0 {
            Req::Blk(r) => {
                r.read(sector, len).unwrap();
            }
            Req::Scsi(r) => {
                r.read16(sector, len / 512).unwrap();
            }
        }
        self
    }

    pub fn bufs(&self) -> Vec<vhost_blk_frontend::Buf> {
        match &self.0 {
            Req::Blk(r) => r.bufs(),
            Req::Scsi(r) => r.bufs(),
        }
    }

    /// How the request ended, from its used length.
    pub fn status(&self, used_len: u32) -> Status {
        match &self.0 {
            Req::Blk(r) => {
                let res = r.result(used_len).unwrap();
                Status {
                    ok: res.status == 0,
                    sense: None,
                    code: res.status,
                }
            }
            Req::Scsi(r) => {
                let res = r.result(used_len).unwrap();
                Status {
                    ok: res.is_good(),
                    sense: res.sense_code(),
                    code: res.status,
                }
            }
        }
    }

    pub fn data(&self) -> Vec<u8> {
        match &self.0 {
            Req::Blk(r) => r.data().unwrap(),
            Req::Scsi(r) => r.data().unwrap(),
        }
    }
}

/// One queue and one request slot.
pub struct QueueDisk {
    pub q: QueueHandle,
    slot: Slot,
}

impl QueueDisk {
    fn run(&mut self) -> Status {
        let head = self.q.submit(&self.slot.bufs()).unwrap();
        let used = self.q.wait(T).unwrap();
        assert_eq!(used.len(), 1);
        assert_eq!(used[0].id, head);
        self.slot.status(used[0].len)
    }

    /// Writes `data` (whole sectors) at `sector`.
    pub fn write(&mut self, sector: u64, data: &[u8]) -> Status {
        self.slot.write(sector, data);
        self.run()
    }

    /// FLUSH / SYNCHRONIZE CACHE(10) of the whole disk.
    pub fn flush(&mut self) -> Status {
        self.slot.flush();
        self.run()
    }

    /// Reads `len` bytes at `sector`.
    pub fn read(&mut self, sector: u64, len: u32) -> (Status, Vec<u8>) {
        self.slot.read(sector, len);
        let s = self.run();
        (s, self.slot.data())
    }
}
