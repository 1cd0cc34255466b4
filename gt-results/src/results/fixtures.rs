//! Test fixtures other crates' tests build on (cargo feature `fixtures`): the fixture run's
//! artefacts framed as the guest agent sends them.

pub const ORDER: &[&str] = &[
    "meta",
    "disk",
    "scan",
    "verify",
    "interrupts.before.1-randread.fio",
    "fio.1-randread.fio.json",
    "interrupts.after.1-randread.fio",
    "irqsw.1-randread.fio",
    "dstacks.1-randread.fio",
    "funcs.1-randread.fio",
    "rescan.1",
    "rescan.0",
    "rescan.2",
    "steps",
    "dmesg",
    "status",
];

pub fn frame(name: &str, data: &[u8]) -> Vec<u8> {
    let mut v = format!("\n@@VB-BEGIN {name} {}\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(format!("\n@@VB-END {name}\n").as_bytes());
    v
}

/// The fixture run as the agent would send it.
pub fn fixture_stream() -> Vec<u8> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../guest-tests/tests/fixtures/artifacts/run-base"
    );
    let mut s = b"[    2.5] console noise\n".to_vec();
    for n in ORDER {
        s.extend(frame(n, &std::fs::read(format!("{dir}/{n}")).unwrap()));
    }
    s
}
