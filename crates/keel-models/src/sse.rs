//! A small incremental Server-Sent Events decoder (the parts of the WHATWG algorithm that
//! model APIs use): bytes go in as they arrive from the socket, the `data` of each complete
//! event comes out as a byte slice.
//!
//! Lines may end in `\n`, `\r\n` or `\r`; several `data:` lines of one event are joined with
//! `\n`; comments (`:`) and the `event`, `id` and `retry` fields are ignored. The decoder
//! reuses its buffers, so steady-state decoding does not allocate.

/// Incremental SSE decoder.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    /// Bytes received but not yet consumed; `buf[start..]` is unconsumed.
    buf: Vec<u8>,
    start: usize,
    /// Data of the event being assembled.
    data: Vec<u8>,
    has_data: bool,
    /// A `\r` ended the previous line: a `\n` right after it belongs to that line end.
    skip_lf: bool,
}

impl SseDecoder {
    /// Appends bytes from the transport.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 4096 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that do not yet form a complete line.
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len() - self.start + self.data.len()
    }

    /// The data of the next complete event, if the buffered bytes hold one.
    pub(crate) fn next_event(&mut self) -> Option<&[u8]> {
        loop {
            if self.skip_lf && self.start < self.buf.len() {
                if self.buf[self.start] == b'\n' {
                    self.start += 1;
                }
                self.skip_lf = false;
            }
            let rest = &self.buf[self.start..];
            let end = rest.iter().position(|&b| b == b'\n' || b == b'\r')?;
            let line_start = self.start;
            self.start += end + 1;
            if rest[end] == b'\r' {
                self.skip_lf = true;
            }
            if self.take_line(line_start, line_start + end) {
                return Some(&self.data);
            }
        }
    }

    /// The stream ended: an unterminated last line and a pending event (a server that forgot
    /// the final blank line) are processed; returns that event's data, if any.
    pub(crate) fn finish(&mut self) -> Option<&[u8]> {
        if self.start < self.buf.len() {
            let (start, end) = (self.start, self.buf.len());
            self.start = end;
            self.take_line(start, end);
        }
        if self.has_data {
            self.has_data = false;
            return Some(&self.data);
        }
        None
    }

    /// Processes `buf[start..end]` as one line; returns true when it completed an event (whose
    /// data is then in `self.data`).
    fn take_line(&mut self, start: usize, end: usize) -> bool {
        let line = &self.buf[start..end];
        if line.is_empty() {
            let complete = self.has_data;
            self.has_data = false;
            return complete;
        }
        if !self.has_data {
            self.data.clear();
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return false, // a comment
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &line[..0]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(pieces: &[&[u8]]) -> Vec<String> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for piece in pieces {
            decoder.push(piece);
            while let Some(data) = decoder.next_event() {
                out.push(String::from_utf8(data.to_vec()).unwrap());
            }
        }
        if let Some(data) = decoder.finish() {
            out.push(String::from_utf8(data.to_vec()).unwrap());
        }
        out
    }

    #[test]
    fn events_split_across_reads_are_reassembled() {
        let out = decode_all(&[b"data: {\"a\"", b":1}\n", b"\ndata: [DO", b"NE]\n\n"]);
        assert_eq!(out, ["{\"a\":1}", "[DONE]"]);
    }

    #[test]
    fn crlf_and_cr_line_endings_are_accepted() {
        let out = decode_all(&[b"data: one\r", b"\n\r\ndata: two\r\rdata: three\n\n"]);
        assert_eq!(out, ["one", "two", "three"]);
    }

    #[test]
    fn multi_line_data_comments_and_other_fields() {
        let out = decode_all(&[b": keep-alive\nevent: x\nid: 7\ndata: a\ndata:b\n\n"]);
        assert_eq!(out, ["a\nb"]);
    }

    #[test]
    fn an_unterminated_last_event_is_delivered_at_the_end() {
        let out = decode_all(&[b"data: [DONE]"]);
        assert_eq!(out, ["[DONE]"]);
    }

    #[test]
    fn blank_lines_without_data_produce_nothing() {
        let out = decode_all(&[b"\n\n\n: ping\n\n"]);
        assert!(out.is_empty());
    }
}
