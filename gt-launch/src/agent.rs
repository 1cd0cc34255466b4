//! Host side of the guest protocol (docs/design/guest-protocol.md): splits the results stream
//! into framed artefacts, incrementally ([`StreamParser`], which launch feeds while QEMU runs)
//! or all at once ([`parse_stream`]).
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
    let mut p = StreamParser::default();
    p.feed(stream);
    p.finish()
}

/// Parses the stream as it arrives: [`feed`](Self::feed) the new bytes, read the complete
/// artefacts so far, [`finish`](Self::finish) at the end (a frame still open is truncated).
/// Every byte is parsed once; the result equals [`parse_stream`] of the whole stream.
#[derive(Debug, Default)]
pub struct StreamParser {
    buf: Vec<u8>,
    /// Where parsing resumes (start of the first undecided frame, or of unscanned bytes).
    pos: usize,
    done: Vec<Artifact>,
    /// The stream ended early: nothing more is parsed (a final frame was truncated).
    stopped: bool,
    /// A frame header has arrived (the frame may still be incomplete).
    started: bool,
}

/// Launch feeds the parser while QEMU runs and asks how far the guest got.
impl crate::StreamWatch for StreamParser {
    fn feed(&mut self, bytes: &[u8]) {
        StreamParser::feed(self, bytes);
    }

    fn progress(&self) -> crate::StreamProgress {
        let done = |n: &str| self.done.iter().any(|a| a.name == n && a.complete);
        crate::StreamProgress {
            any_artifact: self.started,
            device_ready: done("disk"),
            finished: done("status"),
        }
    }

    fn marks(&self) -> Vec<String> {
        self.done
            .iter()
            .filter(|a| a.complete && (a.name.starts_with("begin.") || a.name.starts_with("end.")))
            .map(|a| a.name.clone())
            .collect()
    }
}

impl StreamParser {
    /// Appends bytes and parses every frame they complete.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.parse(false);
    }

    /// The artefacts completed so far.
    pub fn artifacts(&self) -> &[Artifact] {
        &self.done
    }

    /// Ends the stream: a frame cut short is returned truncated.
    pub fn finish(mut self) -> Vec<Artifact> {
        self.parse(true);
        self.done
    }

    fn parse(&mut self, last: bool) {
        let stream = &self.buf;
        while !self.stopped {
            let pos = self.pos;
            let Some(start) = find(stream, BEGIN, pos) else {
                // A marker may still be arriving: keep its possible first bytes.
                self.pos = pos.max(stream.len().saturating_sub(BEGIN.len() - 1));
                return;
            };
            // A BEGIN marker must start a line.
            if start > 0 && stream[start - 1] != b'\n' {
                self.pos = start + BEGIN.len();
                continue;
            }
            let Some(eol) = find(stream, b"\n", start) else {
                self.pos = start;
                self.stopped = last;
                return;
            };
            let header = String::from_utf8_lossy(&stream[start + BEGIN.len()..eol]).into_owned();
            let mut it = header.split_whitespace();
            let (Some(name), Some(len)) =
                (it.next(), it.next().and_then(|l| l.parse::<usize>().ok()))
            else {
                self.pos = eol;
                continue;
            };
            self.started = true;
            let body = eol + 1;
            if body + len > stream.len() {
                self.pos = start;
                if last {
                    self.done.push(Artifact {
                        name: name.into(),
                        data: stream[body..].to_vec(),
                        complete: false,
                    });
                    self.stopped = true;
                }
                return;
            }
            let trailer = format!("\n{END}{name}\n");
            let after = &stream[body + len..];
            if !last && after.len() < trailer.len() && trailer.as_bytes().starts_with(after) {
                // The trailer may still be arriving.
                self.pos = start;
                return;
            }
            let complete = after.starts_with(trailer.as_bytes());
            self.done.push(Artifact {
                name: name.into(),
                data: stream[body..body + len].to_vec(),
                complete,
            });
            self.pos = body + len;
        }
    }
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
    fn fed_byte_by_byte_gives_the_same_artifacts() {
        let mut s = b"noise\n".to_vec();
        s.extend(frame("meta", b"kernel=6.12\n"));
        s.extend_from_slice(b"x @@VB-BEGIN fake 3\n");
        s.extend(frame("dmesg", b"\n@@VB-END dmesg\n@@VB-BEGIN x 1\n"));
        s.extend(frame("bad", b"12"));
        s.truncate(s.len() - 3); // trailer cut: `bad` is incomplete
        s.extend(frame("status", b"ok\n"));
        s.extend_from_slice(b"\n@@VB-BEGIN fio.json 100\n{\"partial\"");
        let whole = parse_stream(&s);
        assert_eq!(whole.len(), 5, "{whole:?}");
        for chunk in [1, 2, 3, 7, 64] {
            let mut p = StreamParser::default();
            let mut seen = 0;
            for c in s.chunks(chunk) {
                p.feed(c);
                // Completed artefacts never change once reported.
                assert_eq!(p.artifacts()[..seen], whole[..seen]);
                seen = p.artifacts().len();
            }
            assert_eq!(p.finish(), whole, "chunk {chunk}");
        }
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
