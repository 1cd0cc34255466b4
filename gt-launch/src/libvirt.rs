//! A libvirt XML snippet equivalent to the run's disk, for users who drive the backend from
//! libvirt instead of this harness.

use std::path::Path;

use gt_suite::{Device, Suite};

/// The `<disk>` (or `<controller>`/`<hostdev>` note for SCSI) plus the shared-memory note.
pub fn snippet(suite: &Suite, socket: Option<&Path>) -> String {
    let s = &suite.spec;
    let mem = format!(
        "<!-- vhost-user needs shared guest memory: -->\n<memoryBacking>\n  <source type='memfd'/>\n  <access mode='shared'/>\n</memoryBacking>\n<vcpu>{}</vcpu>\n",
        s.smp()
    );
    let Some(sock) = socket else {
        return format!(
            "<!-- backend qemu-builtin: QEMU's own device, no vhost-user disk -->\n{mem}"
        );
    };
    let sock = sock
        .display()
        .to_string()
        .replace('&', "&amp;")
        .replace('\'', "&apos;");
    let disk = match s.device {
        Device::Blk => format!(
            "<disk type='vhostuser' device='disk'>\n  <driver name='qemu' type='raw' queues='{}'/>\n  <source type='unix' path='{sock}'>\n    <reconnect enabled='yes' timeout='10'/>\n  </source>\n  <target dev='vda' bus='virtio'/>\n</disk>\n",
            s.num_queues
        ),
        Device::Scsi => format!(
            "<!-- libvirt has no vhost-user-scsi disk type; pass the device through the QEMU\n     command-line namespace (xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'): -->\n<qemu:commandline>\n  <qemu:arg value='-chardev'/>\n  <qemu:arg value='socket,id=vu0,path={sock}'/>\n  <qemu:arg value='-device'/>\n  <qemu:arg value='vhost-user-scsi-pci,chardev=vu0,num_queues={}'/>\n</qemu:commandline>\n",
            s.num_queues
        ),
    };
    format!("{mem}{disk}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gt_suite::SuiteSpec;

    fn suite(dev: &str) -> Suite {
        let spec: SuiteSpec = toml::from_str(&format!(
            "description = \"d\"\nsteps = [\"sleep:1\"]\ndevice = \"{dev}\"\nbackend = \"vhost-blk\"\nnum_queues = 4"
        ))
        .unwrap();
        Suite::from_spec("t", Path::new("/x"), spec).unwrap()
    }

    #[test]
    fn blk_snippet_names_socket_queues_and_shared_memory() {
        let x = snippet(&suite("blk"), Some(Path::new("/tmp/a'b.sock")));
        assert!(x.contains("<disk type='vhostuser' device='disk'>"));
        assert!(x.contains("queues='4'"));
        assert!(x.contains("path='/tmp/a&apos;b.sock'"));
        assert!(x.contains("<access mode='shared'/>"));
    }

    #[test]
    fn scsi_snippet_uses_qemu_commandline() {
        let x = snippet(&suite("scsi"), Some(Path::new("/s")));
        assert!(x.contains("vhost-user-scsi-pci,chardev=vu0,num_queues=4"));
        assert!(!x.contains("<disk"));
    }
}
