//! UNIX-socket connections whose HTTP/2 `:authority` is mended before the
//! HTTP/2 server reads it.
//!
//! gRPC's C core (Python grpcio, Ruby, C#'s Grpc.Core), grpc-java and
//! grpc-swift send the socket path, percent-encoded (`%2Frun%2Fkiln%2Fkiln.sock`)
//! or raw, as the `:authority` of every call over a UNIX socket. That is no
//! valid authority, and the HTTP/2 server under tonic (h2) resets each such
//! stream with PROTOCOL_ERROR before any service sees it; no setting of h2,
//! hyper or tonic relaxes the check (hyperium/h2#487 is open). grpc-go
//! (Curio) sends `localhost` and is unaffected.
//!
//! On a local socket the authority names nothing, so [`MendedStream`] sits
//! between the socket and the server and rewrites it: every header block
//! the client sends (HEADERS + CONTINUATION frames) is HPACK-decoded with
//! the client's compression state, an `:authority` that is not a valid
//! authority becomes `localhost` (what grpc-go sends), and the block is
//! encoded again with this connection's own encoder, whose state the
//! server's decoder then follows. Every other frame, and everything the
//! server sends, passes through unchanged. TCP connections are not touched.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// The client's connection preface: passed through as it is.
const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// Frames this module writes stay within the smallest frame size every
/// HTTP/2 peer must accept.
const MAX_OUT_PAYLOAD: usize = 16_384;
/// A header block larger than this ends the connection (h2's own default
/// header list limit is 16 MiB; gRPC metadata is a few hundred bytes).
const MAX_HEADER_BLOCK: usize = 1 << 20;
/// What replaces an invalid `:authority` (grpc-go's choice for sockets).
const LOCAL_AUTHORITY: &[u8] = b"localhost";

/// The client-to-server byte stream's rewriter (no I/O: bytes in, bytes out).
pub struct AuthorityMender {
    preface_left: usize,
    /// Bytes of an incomplete frame header.
    pending: Vec<u8>,
    /// Payload bytes of a passed-through frame still to come.
    passthrough_left: usize,
    /// The header block being collected, and the frame it arrives in.
    block: Option<HeaderBlock>,
    /// Payload bytes of the HEADERS/CONTINUATION frame being collected still to come.
    collect_left: usize,
    collected: Vec<u8>,
    decoder: loona_hpack::Decoder<'static>,
    encoder: loona_hpack::Encoder<'static>,
    /// Authorities rewritten so far (for the log and tests).
    pub mended: u64,
}

struct HeaderBlock {
    stream_id: u32,
    /// END_STREAM and PRIORITY of the HEADERS frame, kept on the first frame out.
    flags: u8,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
}

impl Default for AuthorityMender {
    fn default() -> Self {
        AuthorityMender {
            preface_left: PREFACE_LEN,
            pending: Vec::new(),
            passthrough_left: 0,
            block: None,
            collect_left: 0,
            collected: Vec::new(),
            decoder: loona_hpack::Decoder::new(),
            encoder: loona_hpack::Encoder::new(),
            mended: 0,
        }
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl AuthorityMender {
    /// Takes bytes the client sent; appends what the server should read to `out`.
    pub fn push(&mut self, mut data: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        while !data.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(data.len());
                out.extend_from_slice(&data[..n]);
                self.preface_left -= n;
                data = &data[n..];
            } else if self.passthrough_left > 0 {
                let n = self.passthrough_left.min(data.len());
                out.extend_from_slice(&data[..n]);
                self.passthrough_left -= n;
                data = &data[n..];
            } else if self.collect_left > 0 {
                let n = self.collect_left.min(data.len());
                self.collected.extend_from_slice(&data[..n]);
                self.collect_left -= n;
                data = &data[n..];
                if self.collect_left == 0 {
                    self.frame_collected(out)?;
                }
            } else {
                let n = (FRAME_HEADER_LEN - self.pending.len()).min(data.len());
                self.pending.extend_from_slice(&data[..n]);
                data = &data[n..];
                if self.pending.len() == FRAME_HEADER_LEN {
                    let header: [u8; FRAME_HEADER_LEN] = self.pending[..].try_into().expect("nine bytes");
                    self.pending.clear();
                    self.frame_header(header, out)?;
                }
            }
        }
        Ok(())
    }

    fn frame_header(&mut self, h: [u8; FRAME_HEADER_LEN], out: &mut Vec<u8>) -> io::Result<()> {
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let kind = h[3];
        if kind == HEADERS || kind == CONTINUATION {
            if (kind == HEADERS) == self.block.is_some() {
                return Err(invalid(format!("HTTP/2 frame type {kind} out of order within a header block")));
            }
            self.collected.clear();
            self.collect_left = len;
            self.pending.extend_from_slice(&h);
            if len == 0 {
                self.frame_collected(out)?;
            }
            return Ok(());
        }
        if self.block.is_some() {
            return Err(invalid(format!("HTTP/2 frame type {kind} inside a header block")));
        }
        out.extend_from_slice(&h);
        self.passthrough_left = len;
        Ok(())
    }

    /// A whole HEADERS or CONTINUATION frame is in (`pending` holds its header).
    fn frame_collected(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        let h: [u8; FRAME_HEADER_LEN] = self.pending[..].try_into().expect("the frame's header was kept");
        self.pending.clear();
        let (kind, flags) = (h[3], h[4]);
        let stream_id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        let payload = std::mem::take(&mut self.collected);
        let fragment = if kind == HEADERS {
            let mut at = 0;
            let pad = if flags & PADDED != 0 {
                at = 1;
                *payload.first().ok_or_else(|| invalid("PADDED HEADERS frame without a pad length".into()))? as usize
            } else {
                0
            };
            let priority = if flags & PRIORITY != 0 {
                let p: [u8; 5] = payload.get(at..at + 5).and_then(|s| s.try_into().ok()).ok_or_else(|| invalid("short PRIORITY fields".into()))?;
                at += 5;
                Some(p)
            } else {
                None
            };
            let end = payload.len().checked_sub(pad).filter(|e| *e >= at).ok_or_else(|| invalid("HEADERS padding longer than the frame".into()))?;
            self.block = Some(HeaderBlock { stream_id, flags: flags & (END_STREAM | PRIORITY), priority, fragment: Vec::new() });
            payload[at..end].to_vec()
        } else {
            payload
        };
        let block = self.block.as_mut().expect("a header block is open");
        if block.stream_id != stream_id {
            return Err(invalid(format!("CONTINUATION for stream {stream_id} inside stream {}'s header block", block.stream_id)));
        }
        block.fragment.extend_from_slice(&fragment);
        if block.fragment.len() > MAX_HEADER_BLOCK {
            return Err(invalid(format!("header block over {MAX_HEADER_BLOCK} bytes")));
        }
        if flags & END_HEADERS != 0 {
            let block = self.block.take().expect("a header block is open");
            self.reencode(block, out)?;
        }
        Ok(())
    }

    fn reencode(&mut self, block: HeaderBlock, out: &mut Vec<u8>) -> io::Result<()> {
        let mut fields = self.decoder.decode(&block.fragment).map_err(|e| invalid(format!("HPACK: {e:?}")))?;
        for (name, value) in fields.iter_mut() {
            if name.as_slice() == b":authority" && http::uri::Authority::try_from(value.as_slice()).is_err() {
                tracing::debug!(authority = %String::from_utf8_lossy(value), "unix socket: :authority replaced by localhost");
                *value = LOCAL_AUTHORITY.to_vec();
                self.mended += 1;
            }
        }
        let encoded = self.encoder.encode(fields.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
        let priority = block.priority.map(|p| p.to_vec()).unwrap_or_default();
        let first_room = MAX_OUT_PAYLOAD - priority.len();
        let (first, rest) = encoded.split_at(first_room.min(encoded.len()));
        let mut chunks: Vec<&[u8]> = vec![first];
        chunks.extend(rest.chunks(MAX_OUT_PAYLOAD));
        let last = chunks.len() - 1;
        for (i, chunk) in chunks.into_iter().enumerate() {
            let (kind, mut flags, prefix) = if i == 0 { (HEADERS, block.flags, &priority[..]) } else { (CONTINUATION, 0, &[][..]) };
            if i == last {
                flags |= END_HEADERS;
            }
            let len = (prefix.len() + chunk.len()) as u32;
            out.extend_from_slice(&len.to_be_bytes()[1..]);
            out.extend_from_slice(&[kind, flags]);
            out.extend_from_slice(&block.stream_id.to_be_bytes());
            out.extend_from_slice(prefix);
            out.extend_from_slice(chunk);
        }
        Ok(())
    }
}

/// A UNIX-socket connection read through an [`AuthorityMender`].
pub struct MendedStream {
    inner: tokio::net::UnixStream,
    mender: AuthorityMender,
    /// Mended bytes not yet read by the server, from `out_at` on.
    out: Vec<u8>,
    out_at: usize,
    scratch: Box<[u8]>,
}

impl MendedStream {
    pub fn new(inner: tokio::net::UnixStream) -> Self {
        MendedStream { inner, mender: AuthorityMender::default(), out: Vec::new(), out_at: 0, scratch: vec![0; 64 << 10].into_boxed_slice() }
    }
}

impl AsyncRead for MendedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_at < this.out.len() {
                let n = (this.out.len() - this.out_at).min(buf.remaining());
                buf.put_slice(&this.out[this.out_at..this.out_at + n]);
                this.out_at += n;
                if this.out_at == this.out.len() {
                    this.out.clear();
                    this.out_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut raw = ReadBuf::new(&mut this.scratch);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut raw))?;
            if raw.filled().is_empty() {
                return Poll::Ready(Ok(())); // end of stream
            }
            this.mender.push(raw.filled(), &mut this.out)?;
        }
    }
}

impl AsyncWrite for MendedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl Connected for MendedStream {
    type ConnectInfo = <tokio::net::UnixStream as Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[kind, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// Splits `bytes` into frames: (type, flags, stream, payload).
    fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        let mut all = Vec::new();
        while !bytes.is_empty() {
            let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
            all.push((bytes[3], bytes[4], u32::from_be_bytes(bytes[5..9].try_into().unwrap()), bytes[9..9 + len].to_vec()));
            bytes = &bytes[9 + len..];
        }
        all
    }

    fn request(authority: &str, path: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", authority), ("te", "trailers")]
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    fn encode(enc: &mut loona_hpack::Encoder<'static>, fields: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        enc.encode(fields.iter().map(|(n, v)| (n.as_slice(), v.as_slice())))
    }

    /// Two requests from a client whose HPACK state carries over (the second
    /// names the path-shaped authority from its dynamic table), split at every
    /// byte boundary: the server reads both with `localhost`, DATA intact.
    #[test]
    fn path_authorities_become_localhost_in_every_block() {
        let mut client = loona_hpack::Encoder::new();
        let bad = "%2Ftmp%2Fkiln%2Fkiln.sock";
        let mut input = PREFACE.to_vec();
        input.extend(frame(0x4, 0, 0, &[])); // SETTINGS
        input.extend(frame(HEADERS, END_HEADERS, 1, &encode(&mut client, &request(bad, "/cuzk.v1.ProvingEngine/GetStatus"))));
        input.extend(frame(0x0, END_STREAM, 1, b"\0\0\0\0\0"));
        let second = encode(&mut client, &request(bad, "/cuzk.v1.ProvingEngine/GetMetrics"));
        // The second block arrives padded, with priority, split over a CONTINUATION.
        let (a, b) = second.split_at(second.len() / 2);
        let mut padded = vec![3u8];
        padded.extend_from_slice(&[0, 0, 0, 0, 16]);
        padded.extend_from_slice(a);
        padded.extend_from_slice(&[0, 0, 0]);
        input.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 3, &padded));
        input.extend(frame(CONTINUATION, END_HEADERS, 3, b));
        for step in [1, 2, 7, 9, 10, input.len()] {
            let mut mender = AuthorityMender::default();
            let mut out = Vec::new();
            for piece in input.chunks(step) {
                mender.push(piece, &mut out).unwrap();
            }
            assert_eq!(&out[..24], PREFACE);
            let f = frames(&out[24..]);
            let kinds: Vec<(u8, u8, u32)> = f.iter().map(|(k, fl, s, _)| (*k, *fl, *s)).collect();
            assert_eq!(kinds, vec![(0x4, 0, 0), (HEADERS, END_HEADERS, 1), (0x0, END_STREAM, 1), (HEADERS, PRIORITY | END_STREAM | END_HEADERS, 3)], "step {step}");
            assert_eq!(f[2].3, b"\0\0\0\0\0");
            assert_eq!(&f[3].3[..5], &[0, 0, 0, 0, 16], "the priority fields are kept");
            let mut server = loona_hpack::Decoder::new();
            let first = server.decode(&f[1].3).unwrap();
            let second = server.decode(&f[3].3[5..]).unwrap();
            assert_eq!(first, request("localhost", "/cuzk.v1.ProvingEngine/GetStatus"), "step {step}");
            assert_eq!(second, request("localhost", "/cuzk.v1.ProvingEngine/GetMetrics"), "step {step}");
            assert_eq!(mender.mended, 2);
        }
    }

    #[test]
    fn valid_authorities_and_other_frames_are_left_alone() {
        let mut client = loona_hpack::Encoder::new();
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &encode(&mut client, &request("localhost:50051", "/x"))));
        let big = vec![7u8; 40_000];
        input.extend(frame(0x0, 0, 1, &big));
        let mut mender = AuthorityMender::default();
        let mut out = Vec::new();
        mender.push(&input, &mut out).unwrap();
        let f = frames(&out[24..]);
        assert_eq!(loona_hpack::Decoder::new().decode(&f[0].3).unwrap(), request("localhost:50051", "/x"));
        assert_eq!(f[1].3, big);
        assert_eq!(mender.mended, 0);
    }

    #[test]
    fn large_blocks_are_split_into_frames_a_server_accepts() {
        let mut client = loona_hpack::Encoder::new();
        let mut fields = request("/raw/path.sock", "/y");
        fields.push((b"x-big".to_vec(), vec![b'a'; 40_000]));
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, END_HEADERS, 5, &encode(&mut client, &fields)));
        let mut out = Vec::new();
        AuthorityMender::default().push(&input, &mut out).unwrap();
        let f = frames(&out[24..]);
        assert!(f.len() >= 3 && f.iter().all(|(_, _, s, p)| *s == 5 && p.len() <= MAX_OUT_PAYLOAD));
        assert_eq!(f[0].0, HEADERS);
        assert!(f[1..].iter().all(|(k, _, _, _)| *k == CONTINUATION));
        assert_eq!(f.iter().filter(|(_, fl, _, _)| fl & END_HEADERS != 0).count(), 1);
        let block: Vec<u8> = f.iter().flat_map(|(_, _, _, p)| p.clone()).collect();
        let decoded = loona_hpack::Decoder::new().decode(&block).unwrap();
        assert_eq!(decoded[3], (b":authority".to_vec(), b"localhost".to_vec()));
        assert_eq!(decoded[5].1.len(), 40_000);
    }

    #[test]
    fn broken_framing_ends_the_connection() {
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, 0, 1, &[0x82])); // no END_HEADERS
        input.extend(frame(0x0, 0, 1, b"x"));
        let e = AuthorityMender::default().push(&input, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("inside a header block"), "{e}");
        let mut input = PREFACE.to_vec();
        input.extend(frame(CONTINUATION, END_HEADERS, 1, &[0x82]));
        assert!(AuthorityMender::default().push(&input, &mut Vec::new()).is_err());
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, END_HEADERS, 1, &[0xff, 0xff, 0xff, 0xff, 0x0f]));
        let e = AuthorityMender::default().push(&input, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("HPACK"), "{e}");
    }
}
