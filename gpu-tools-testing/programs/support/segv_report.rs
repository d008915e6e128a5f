//! A report of a crash from SIGSEGV, for a test program whose crash happens where no debugger can watch: on
//! stderr, the thread, the instruction pointer and the fault address, the mapping (file and offset) that holds the
//! instruction, and the code addresses found in the top of the thread's stack. The signal then ends the process as
//! it would have (the exit status stays "killed by SIGSEGV").
//!
//! Only system calls and stack buffers are used inside the handler: nothing there allocates or takes a lock.

use std::ffi::c_void;

/// Installs the handler for the whole process (every thread).
pub fn install() {
    // SAFETY: a zeroed `sigaction` is a valid start; the handler has the SA_SIGINFO signature; SA_RESETHAND puts
    // the default action back before the handler runs, so the re-raised signal ends the process.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut());
    }
}

/// A line under construction on the stack.
struct Line {
    bytes: [u8; 600],
    len: usize,
}

impl Line {
    fn new() -> Self {
        Line {
            bytes: [0; 600],
            len: 0,
        }
    }

    fn text(&mut self, s: &[u8]) -> &mut Self {
        for &b in s {
            if self.len < self.bytes.len() {
                self.bytes[self.len] = b;
                self.len += 1;
            }
        }
        self
    }

    fn hex(&mut self, mut v: u64) -> &mut Self {
        let mut digits = [0u8; 16];
        let mut n = 0;
        loop {
            digits[n] = b"0123456789abcdef"[(v & 0xf) as usize];
            n += 1;
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        self.text(b"0x");
        for i in (0..n).rev() {
            self.text(&digits[i..=i]);
        }
        self
    }

    fn write(&mut self) {
        self.text(b"\n");
        // SAFETY: writes the line's initialised bytes to stderr.
        unsafe { libc::write(2, self.bytes.as_ptr().cast(), self.len) };
        self.len = 0;
    }
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        v = (v << 4) | u64::from(d);
    }
    Some(v)
}

/// One line of /proc/self/maps: start, end, executable, offset, path.
fn mapping(line: &[u8]) -> Option<(u64, u64, bool, u64, &[u8])> {
    let mut fields = line.split(|&b| b == b' ').filter(|f| !f.is_empty());
    let range = fields.next()?;
    let dash = range.iter().position(|&b| b == b'-')?;
    let (start, end) = (parse_hex(&range[..dash])?, parse_hex(&range[dash + 1..])?);
    let perms = fields.next()?;
    let offset = parse_hex(fields.next()?)?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or(b"[anonymous]");
    Some((start, end, perms.get(2) == Some(&b'x'), offset, path))
}

/// Calls `each` for every line of /proc/self/maps, read in small pieces.
fn for_each_mapping(mut each: impl FnMut(&[u8])) {
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY) };
    if fd < 0 {
        return;
    }
    let mut chunk = [0u8; 4096];
    let mut line = [0u8; 1024];
    let mut len = 0;
    loop {
        // SAFETY: reads into a buffer of the stated size.
        let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast::<c_void>(), chunk.len()) };
        if n <= 0 {
            break;
        }
        for &b in &chunk[..n as usize] {
            if b == b'\n' {
                each(&line[..len]);
                len = 0;
            } else if len < line.len() {
                line[len] = b;
                len += 1;
            }
        }
    }
    // SAFETY: the descriptor opened above.
    unsafe { libc::close(fd) };
}

/// Writes where `address` lies: the mapping's file and the offset in it.
fn locate(out: &mut Line, address: u64) {
    let mut found = false;
    for_each_mapping(|line| {
        if let Some((start, end, _, offset, path)) = mapping(line) {
            if !found && (start..end).contains(&address) {
                found = true;
                out.text(path).text(b"+").hex(address - start + offset);
            }
        }
    });
    if !found {
        out.text(b"(unmapped)");
    }
}

fn is_code(address: u64) -> bool {
    let mut code = false;
    for_each_mapping(|line| {
        if let Some((start, end, exec, _, _)) = mapping(line) {
            code |= exec && (start..end).contains(&address);
        }
    });
    code
}

extern "C" fn handler(signal: i32, info: *mut libc::siginfo_t, context: *mut c_void) {
    let mut out = Line::new();
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
    let (fault, pc, sp) = unsafe {
        let uc = &*(context as *const libc::ucontext_t);
        (
            (*info).si_addr() as u64,
            uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64,
            uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64,
        )
    };
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes; gettid has no arguments.
    let tid = unsafe {
        libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr());
        libc::syscall(libc::SYS_gettid)
    };
    let name_len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    out.text(b"SEGV: thread ")
        .hex(tid as u64)
        .text(b" (")
        .text(&name[..name_len])
        .text(b") pc ")
        .hex(pc)
        .text(b" fault address ")
        .hex(fault)
        .text(b" in ");
    locate(&mut out, pc);
    out.write();
    // Code addresses among the top words of the stack: the callers, most of them.
    let mut stack_end = sp;
    for_each_mapping(|line| {
        if let Some((start, end, _, _, _)) = mapping(line) {
            if (start..end).contains(&sp) {
                stack_end = end;
            }
        }
    });
    let mut shown = 0;
    let mut slot = sp;
    while slot + 8 <= stack_end && slot - sp < 4096 && shown < 16 {
        // SAFETY: the slot lies inside the mapping that holds this thread's stack pointer.
        let word = unsafe { std::ptr::read_volatile(slot as *const u64) };
        if word > 0x1000 && is_code(word) {
            out.text(b"SEGV:   stack +").hex(slot - sp).text(b": ");
            locate(&mut out, word);
            out.write();
            shown += 1;
        }
        slot += 8;
    }
    // SAFETY: the default action is back (SA_RESETHAND); the signal is delivered when the handler returns.
    unsafe { libc::raise(signal) };
}
