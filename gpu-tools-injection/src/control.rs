//! The control bytes of an attached session: what the tool writes on an attached process's connection
//! ([`Control`]; `attach::Attached::send` and `stop` write them) and the one reader of them in the injected library
//! ([`ControlReader`]), for its trace and its profiling alike.
//!
//! ```
//! use gpu_tools_injection::control::{Control, ControlReader};
//!
//! // What the tool sent: a start, a byte of a later version, a finish, the stop; then the connection closed.
//! let sent = [Control::ProfileStart.byte(), b'?', Control::ProfileFinish.byte(), Control::Stop.byte()];
//! let read: Vec<Control> = ControlReader::new(&sent[..]).collect();
//! assert_eq!(read, [Control::ProfileStart, Control::ProfileFinish, Control::Stop]);
//! ```

use std::io::{ErrorKind, Read};

/// A control byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Control {
    /// Stop: the library disables what it enabled, delivers its records, ends its stream and goes dormant
    /// (closing the connection does the same).
    Stop,
    /// Profiling mode (PC sampling or kernel metrics, `gpu-tools profile --pid`): start, sent once every other
    /// thread of the process is stopped outside the CUDA driver and CUPTI; answered with
    /// [`Message::ProfileStarted`](crate::message::Message::ProfileStarted).
    ProfileStart,
    /// The same, to finish and send what was collected; answered with
    /// [`Message::ProfileFinished`](crate::message::Message::ProfileFinished).
    ProfileFinish,
}

impl Control {
    /// Every control, in the order of its byte's meaning above.
    pub const ALL: [Control; 3] = [Control::Stop, Control::ProfileStart, Control::ProfileFinish];

    /// The byte on the connection.
    pub fn byte(self) -> u8 {
        match self {
            Control::Stop => b'S',
            Control::ProfileStart => b'P',
            Control::ProfileFinish => b'F',
        }
    }

    /// The control a byte stands for (`None`: a byte this crate does not know).
    pub fn from_byte(byte: u8) -> Option<Control> {
        Control::ALL.into_iter().find(|c| c.byte() == byte)
    }
}

/// Reads the controls the tool sends on a connection, one byte at a time, as they come: an iterator that ends
/// when the connection does (closed by the tool, or failed), which the library takes as a stop.
#[derive(Debug)]
pub struct ControlReader<R> {
    connection: R,
}

impl<R: Read> ControlReader<R> {
    /// Reads `connection` (the library's end of its socket).
    pub fn new(connection: R) -> ControlReader<R> {
        ControlReader { connection }
    }
}

impl<R: Read> Iterator for ControlReader<R> {
    type Item = Control;

    /// Blocks until the next control: a byte this crate does not know is passed over, a read interrupted by a
    /// signal is made again; `None` once the connection has ended or failed.
    fn next(&mut self) -> Option<Control> {
        let mut byte = [0u8; 1];
        loop {
            match self.connection.read(&mut byte) {
                Ok(0) => return None,
                Ok(_) => {
                    if let Some(control) = Control::from_byte(byte[0]) {
                        return Some(control);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection that is interrupted once, then gives its bytes one read at a time, then fails.
    struct Flaky {
        bytes: Vec<u8>,
        interrupted: bool,
    }

    impl Read for Flaky {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if !self.interrupted {
                self.interrupted = true;
                return Err(ErrorKind::Interrupted.into());
            }
            if self.bytes.is_empty() {
                return Err(ErrorKind::ConnectionReset.into());
            }
            buf[0] = self.bytes.remove(0);
            Ok(1)
        }
    }

    #[test]
    fn each_byte_stands_for_one_control_and_back() {
        for c in Control::ALL {
            assert_eq!(Control::from_byte(c.byte()), Some(c));
        }
        assert_eq!(
            Control::Stop.byte(),
            b'S',
            "the byte the libraries of earlier releases read"
        );
        assert_eq!(Control::from_byte(0), None);
    }

    #[test]
    fn the_reader_passes_over_unknown_bytes_retries_interrupts_and_ends_with_the_connection() {
        let connection = Flaky {
            bytes: vec![b'x', b'P', 0, b'F', b'S', b'P'],
            interrupted: false,
        };
        let read: Vec<Control> = ControlReader::new(connection).collect();
        assert_eq!(
            read,
            [
                Control::ProfileStart,
                Control::ProfileFinish,
                Control::Stop,
                Control::ProfileStart
            ],
            "every control until the connection failed, the stop not the end of the reading"
        );
        assert_eq!(
            ControlReader::new(&[][..]).next(),
            None,
            "a closed connection"
        );
    }
}
