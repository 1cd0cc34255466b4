//! Host side of the guest protocol (docs/design/guest-protocol.md): splits the results stream
//! into framed artefacts.
//!
//! A frame is `\n@@VB-BEGIN <name> <len>\n` + exactly `len` raw bytes + `\n@@VB-END <name>\n`.
//! Anything between frames (a kernel message that slipped onto the port) is ignored. A frame
//! cut short (the guest died) is reported as truncated, with the bytes that did arrive.

const BEGIN: &[u8] = b"@@VB-BEGIN ";
const END: &str = "@@VB-END ";

/// One artefact sent by the guest agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub name: String,
    pub data: Vec<u8>,
    /// False when the stream ended before the frame did.
    pub complete: bool,
}

impl Artifact {
    /// The artefact as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from >= hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Parses every frame in `stream`, in order.
pub fn parse_stream(stream: &[u8]) -> Vec<Artifact> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(start) = find(stream, BEGIN, pos) {
        // A BEGIN marker must start a line.
        if start > 0 && stream[start - 1] != b'\n' {
            pos = start + BEGIN.len();
            continue;
        }
        let Some(eol) = find(stream, b"\n", start) else {
            break;
        };
        let header = String::from_utf8_lossy(&stream[start + BEGIN.len()..eol]).into_owned();
        let mut it = header.split_whitespace();
        let (Some(name), Some(len)) = (it.next(), it.next().and_then(|l| l.parse::<usize>().ok()))
        else {
            pos = eol;
            continue;
        };
        let body = eol + 1;
        if body + len > stream.len() {
            out.push(Artifact {
                name: name.into(),
                data: stream[body..].to_vec(),
                complete: false,
            });
            break;
        }
        let trailer = format!("\n{END}{name}\n");
        let complete = stream[body + len..].starts_with(trailer.as_bytes());
        out.push(Artifact {
            name: name.into(),
            data: stream[body..body + len].to_vec(),
            complete,
        });
        pos = body + len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str, data: &[u8]) -> Vec<u8> {
        let mut v = format!("\n@@VB-BEGIN {name} {}\n", data.len()).into_bytes();
        v.extend_from_slice(data);
        v.extend_from_slice(format!("\n@@VB-END {name}\n").as_bytes());
        v
    }

    #[test]
    fn parses_frames_with_binary_and_noise_between() {
        let mut s = b"[    1.0] noise\n".to_vec();
        s.extend(frame("meta", b"kernel=6.12\n"));
        s.extend_from_slice(b"garbage @@VB-BEGIN fake 3\n");
        s.extend(frame("bin", &[0, 10, 64, 64, 255]));
        let a = parse_stream(&s);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].name, "meta");
        assert_eq!(a[0].text(), "kernel=6.12\n");
        assert_eq!(a[1].data, vec![0, 10, 64, 64, 255]);
        assert!(a.iter().all(|x| x.complete));
    }

    #[test]
    fn body_containing_a_marker_is_not_split() {
        let s = frame("dmesg", b"\n@@VB-END dmesg\n@@VB-BEGIN x 1\n");
        let a = parse_stream(&s);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].data, b"\n@@VB-END dmesg\n@@VB-BEGIN x 1\n");
    }

    #[test]
    fn truncated_frame_is_marked() {
        let mut s = frame("a", b"ok");
        s.extend_from_slice(b"\n@@VB-BEGIN fio.json 100\n{\"partial\"");
        let a = parse_stream(&s);
        assert_eq!(a.len(), 2);
        assert!(a[0].complete);
        assert!(!a[1].complete);
        assert_eq!(a[1].data, b"{\"partial\"");
    }
}
