//! virtio-scsi framing on an adversarial ring: command requests on a request queue (LUN field,
//! CDB of the configured size, data-out and data-in), task management and asynchronous
//! notification requests on the control queue, and the event queue; the driver-writable CDB
//! and sense sizes come from the input too. Checks: no panic, the used length never exceeds
//! the chain's writable bytes, nothing outside the device-writable buffers changes.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use vhost_blk::device::Personality;
use vhost_blk::scsi::config_space::{CDB_SIZE_OFFSET, SENSE_SIZE_OFFSET};
use vhost_blk::scsi::{ScsiOptions, ScsiPersonality};
use vhost_blk_fuzz::*;
use vhost_blk_scsi::emulation::Topology;
use vhost_blk_scsi::topology::compact::parse_topology;

fn personality() -> &'static ScsiPersonality {
    static P: OnceLock<ScsiPersonality> = OnceLock::new();
    P.get_or_init(|| {
        let cfg =
            parse_topology("0:0=mem:1M,0:1=null:1M,2:0=null:1M,max_target=3").expect("topology");
        let t = Topology::from_config(&cfg).expect("topology");
        let opts = ScsiOptions {
            num_queues: 1,
            queue_size: QUEUE_SIZE,
            cmd_per_lun: 8,
        };
        ScsiPersonality::new(Arc::new(t), opts)
    })
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let p = personality();
    let queue = usize::from(input.u8() % 3);
    // Most runs keep the default sizes (32 / 96); some set others, as a driver may.
    let sizes = input.u8();
    let (cdb, sense) = (input.u8(), input.u8());
    p.reset();
    if sizes & 1 != 0 {
        let _ = p.set_config(CDB_SIZE_OFFSET as u32, &u32::from(cdb).to_le_bytes());
    }
    if sizes & 2 != 0 {
        let _ = p.set_config(SENSE_SIZE_OFFSET as u32, &u32::from(sense).to_le_bytes());
    }
    process_checked(&mut input, |chain| p.process(queue, chain));
});
