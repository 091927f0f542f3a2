//! The seccomp filter: the system calls a tool never needs, refused with
//! `EPERM` (never a kill, so a program sees an error it can report).
//!
//! Refused: tracing other processes (`ptrace`, `process_vm_*`), mounting and
//! changing root, new namespaces (`unshare`, `setns`, `clone` with a
//! `CLONE_NEW*` flag), kernel keyrings, `bpf`, `perf_event_open`, loading
//! kernels and modules, `userfaultfd`, `io_uring` (it performs file and socket
//! operations past the checks on the calls above), file handles
//! (`open_by_handle_at`, the classic container escape), swap, reboot,
//! accounting, quotas, the kernel log, and on x86-64 port I/O and the LDT.
//! `clone3` answers `ENOSYS`, since its flags cannot be inspected: the C
//! library then falls back to `clone`, whose flags can. On x86-64 the x32
//! system-call numbers, which would otherwise pass a list of x86-64 numbers,
//! are refused as a whole, and a system call of another architecture (a
//! 32-bit program) kills the process.
//!
//! The program is written here rather than generated: it is a short list, and
//! each instruction is tested.

/// One classic BPF instruction, as `struct sock_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// BPF_LD | BPF_W | BPF_ABS (the first two are 0).
const LD_W_ABS: u16 = 0x20;
/// BPF_ALU | BPF_AND | BPF_K.
const AND_K: u16 = 0x04 | 0x50;
const JEQ_K: u16 = 0x05 | 0x10;
const JGE_K: u16 = 0x05 | 0x30;
const JSET_K: u16 = 0x05 | 0x40;
const RET_K: u16 = 0x06;

pub const RET_ALLOW: u32 = 0x7fff_0000;
pub const RET_ERRNO: u32 = 0x0005_0000;
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;

/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of the first and second arguments (little-endian machines).
const ARG0_LO: u32 = 16;
const ARG1_LO: u32 = 24;

/// Every `CLONE_NEW*` flag.
#[cfg(target_os = "linux")]
const CLONE_NEW_MASK: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: Option<u32> = None;

/// Whether this architecture has a filter.
pub fn supported() -> bool {
    AUDIT_ARCH.is_some()
}

/// The system calls refused with `EPERM`, by name and number.
#[cfg(target_os = "linux")]
pub fn denied() -> Vec<(&'static str, i64)> {
    macro_rules! calls {
        ($($name:ident),* $(,)?) => {
            vec![$((stringify!($name), libc::$name as i64)),*]
        };
    }
    #[allow(unused_mut)]
    let mut list = calls![
        SYS_ptrace,
        SYS_process_vm_readv,
        SYS_process_vm_writev,
        SYS_mount,
        SYS_umount2,
        SYS_pivot_root,
        SYS_chroot,
        SYS_fsopen,
        SYS_fsconfig,
        SYS_fsmount,
        SYS_fspick,
        SYS_move_mount,
        SYS_open_tree,
        SYS_mount_setattr,
        SYS_add_key,
        SYS_request_key,
        SYS_keyctl,
        SYS_bpf,
        SYS_perf_event_open,
        SYS_kexec_load,
        SYS_kexec_file_load,
        SYS_init_module,
        SYS_finit_module,
        SYS_delete_module,
        SYS_userfaultfd,
        SYS_io_uring_setup,
        SYS_io_uring_enter,
        SYS_io_uring_register,
        SYS_unshare,
        SYS_setns,
        SYS_swapon,
        SYS_swapoff,
        SYS_reboot,
        SYS_acct,
        SYS_quotactl,
        SYS_open_by_handle_at,
        SYS_name_to_handle_at,
        SYS_syslog,
        SYS_lookup_dcookie,
        SYS_vhangup,
    ];
    #[cfg(target_arch = "x86_64")]
    list.extend(calls![SYS_iopl, SYS_ioperm, SYS_uselib, SYS_modify_ldt]);
    list.iter_mut()
        .for_each(|(n, _)| *n = n.strip_prefix("SYS_").unwrap_or(n));
    list
}

#[cfg(not(target_os = "linux"))]
pub fn denied() -> Vec<(&'static str, i64)> {
    Vec::new()
}

/// Also refused without namespaces (no IPC namespace to hold them): SysV
/// shared memory, message queues and semaphores, and POSIX message queues.
/// A host segment would otherwise be attachable by its id, and one made
/// inside would outlive the call.
#[cfg(target_os = "linux")]
pub fn denied_without_namespaces() -> Vec<(&'static str, i64)> {
    macro_rules! calls {
        ($($name:ident),* $(,)?) => {
            vec![$((stringify!($name), libc::$name as i64)),*]
        };
    }
    let mut list = calls![
        SYS_shmget,
        SYS_shmat,
        SYS_shmdt,
        SYS_shmctl,
        SYS_msgget,
        SYS_msgsnd,
        SYS_msgrcv,
        SYS_msgctl,
        SYS_semget,
        SYS_semop,
        SYS_semtimedop,
        SYS_semctl,
        SYS_mq_open,
        SYS_mq_unlink,
        SYS_mq_timedsend,
        SYS_mq_timedreceive,
        SYS_mq_notify,
        SYS_mq_getsetattr,
    ];
    list.iter_mut()
        .for_each(|(n, _)| *n = n.strip_prefix("SYS_").unwrap_or(n));
    list
}

#[cfg(not(target_os = "linux"))]
pub fn denied_without_namespaces() -> Vec<(&'static str, i64)> {
    Vec::new()
}

/// Where a jump goes.
#[derive(Clone, Copy)]
enum To {
    Next,
    Allow,
    Eperm,
    Enosys,
    /// An instruction of the body, by index.
    At(usize),
}

/// The filter program (empty where the architecture or the system has none).
pub fn program() -> Vec<Insn> {
    program_for(false)
}

/// The filter, and with `no_namespaces` (no network namespace to hold the
/// network, no PID namespace to hold processes, no IPC namespace) also: SysV
/// IPC and POSIX message queues ([`denied_without_namespaces`]), UDP and raw
/// sockets
/// (`socket(AF_INET*, SOCK_DGRAM|SOCK_RAW)`, the DNS and ICMP ways out that
/// Landlock's TCP rules do not cover), packet sockets, and `setsid` (a
/// program that leaves the call's session would outlive it).
pub fn program_for(no_namespaces: bool) -> Vec<Insn> {
    #[cfg(target_os = "linux")]
    {
        linux_program(no_namespaces)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = no_namespaces;
        Vec::new()
    }
}

#[cfg(target_os = "linux")]
fn linux_program(no_namespaces: bool) -> Vec<Insn> {
    let Some(arch) = AUDIT_ARCH else {
        return Vec::new();
    };
    let (clone, clone3) = (libc::SYS_clone as u32, libc::SYS_clone3 as u32);
    // Fixed head: arch check.
    let mut code: Vec<Insn> = vec![Insn {
        code: LD_W_ABS,
        jt: 0,
        jf: 0,
        k: ARCH,
    }];
    code.push(Insn {
        code: JEQ_K,
        jt: 1,
        jf: 0,
        k: arch,
    });
    code.push(Insn {
        code: RET_K,
        jt: 0,
        jf: 0,
        k: RET_KILL_PROCESS,
    });
    code.push(Insn {
        code: LD_W_ABS,
        jt: 0,
        jf: 0,
        k: NR,
    });
    let mut rest: Vec<(u16, u32, To, To)> = Vec::new();
    if cfg!(target_arch = "x86_64") {
        // x32 numbers carry bit 30.
        rest.push((JGE_K, 0x4000_0000, To::Eperm, To::Next));
    }
    for (_, nr) in denied() {
        rest.push((JEQ_K, nr as u32, To::Eperm, To::Next));
    }
    if no_namespaces {
        for (_, nr) in denied_without_namespaces() {
            rest.push((JEQ_K, nr as u32, To::Eperm, To::Next));
        }
    }
    rest.push((JEQ_K, clone3, To::Enosys, To::Next));
    // Where the socket checks start, once the clone check is laid out.
    let socket_at = rest.len() + 5;
    if no_namespaces {
        rest.push((JEQ_K, libc::SYS_setsid as u32, To::Eperm, To::Next));
        rest.push((JEQ_K, libc::SYS_socket as u32, To::At(socket_at), To::Next));
    } else {
        // Two no-ops keep one layout for both programs.
        rest.push((JEQ_K, u32::MAX, To::Next, To::Next));
        rest.push((JEQ_K, u32::MAX, To::Next, To::Next));
    }
    // clone: look at its flags; anything else is allowed.
    rest.push((JEQ_K, clone, To::Next, To::Allow));
    rest.push((LD_W_ABS, ARG0_LO, To::Next, To::Next));
    rest.push((JSET_K, CLONE_NEW_MASK, To::Eperm, To::Allow));
    if no_namespaces {
        debug_assert_eq!(rest.len(), socket_at);
        let types_at = socket_at + 4;
        rest.push((LD_W_ABS, ARG0_LO, To::Next, To::Next));
        rest.push((JEQ_K, libc::AF_PACKET as u32, To::Eperm, To::Next));
        rest.push((JEQ_K, libc::AF_INET as u32, To::At(types_at), To::Next));
        rest.push((JEQ_K, libc::AF_INET6 as u32, To::At(types_at), To::Allow));
        rest.push((LD_W_ABS, ARG1_LO, To::Next, To::Next));
        rest.push((AND_K, 0xf, To::Next, To::Next));
        rest.push((JEQ_K, libc::SOCK_DGRAM as u32, To::Eperm, To::Next));
        rest.push((JEQ_K, libc::SOCK_RAW as u32, To::Eperm, To::Allow));
    }
    let base = code.len();
    let allow = base + rest.len();
    let eperm = allow + 1;
    let enosys = allow + 2;
    for (i, (c, k, jt, jf)) in rest.into_iter().enumerate() {
        let at = base + i;
        let off = |to: To| -> u8 {
            let target = match to {
                To::Next => at + 1,
                To::Allow => allow,
                To::Eperm => eperm,
                To::Enosys => enosys,
                To::At(i) => base + i,
            };
            u8::try_from(target - (at + 1)).expect("jump within 255 instructions")
        };
        let is_jump = c & 0x07 == 0x05;
        code.push(Insn {
            code: c,
            jt: if is_jump { off(jt) } else { 0 },
            jf: if is_jump { off(jf) } else { 0 },
            k,
        });
    }
    for k in [
        RET_ALLOW,
        RET_ERRNO | libc::EPERM as u32,
        RET_ERRNO | libc::ENOSYS as u32,
    ] {
        code.push(Insn {
            code: RET_K,
            jt: 0,
            jf: 0,
            k,
        });
    }
    code
}

/// Run `program` on one system call, as the kernel would: the action it
/// returns. For tests.
pub fn evaluate(program: &[Insn], arch: u32, nr: u32, arg0: u64, arg1: u64) -> u32 {
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    while let Some(i) = program.get(pc) {
        pc += 1;
        match i.code {
            LD_W_ABS => {
                acc = match i.k {
                    NR => nr,
                    ARCH => arch,
                    ARG0_LO => arg0 as u32,
                    ARG1_LO => arg1 as u32,
                    _ => 0,
                }
            }
            AND_K => acc &= i.k,
            JEQ_K | JGE_K | JSET_K => {
                let hit = match i.code {
                    JEQ_K => acc == i.k,
                    JGE_K => acc >= i.k,
                    _ => acc & i.k != 0,
                };
                pc += usize::from(if hit { i.jt } else { i.jf });
            }
            RET_K => return i.k,
            _ => return RET_KILL_PROCESS,
        }
    }
    RET_KILL_PROCESS
}

#[cfg(all(
    test,
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod tests {
    use super::*;

    fn run(nr: i64, arg0: u64) -> u32 {
        evaluate(&program(), AUDIT_ARCH.unwrap(), nr as u32, arg0, 0)
    }

    #[test]
    fn denied_calls_get_eperm_and_the_rest_pass() {
        let eperm = RET_ERRNO | libc::EPERM as u32;
        for (name, nr) in denied() {
            assert_eq!(run(nr, 0), eperm, "{name}");
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_socket,
            libc::SYS_connect,
            libc::SYS_setsid,
            libc::SYS_landlock_create_ruleset,
        ] {
            assert_eq!(run(nr, 0), RET_ALLOW, "{nr}");
        }
        assert_eq!(run(libc::SYS_clone3, 0), RET_ERRNO | libc::ENOSYS as u32);
        // A thread or a fork passes; a new namespace does not.
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(run(libc::SYS_clone, thread), RET_ALLOW);
        assert_eq!(run(libc::SYS_clone, libc::SIGCHLD as u64), RET_ALLOW);
        for flag in [
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWNS,
            libc::CLONE_NEWNET,
            libc::CLONE_NEWPID,
        ] {
            assert_eq!(run(libc::SYS_clone, (flag | libc::SIGCHLD) as u64), eperm);
        }
        // Another architecture's call kills.
        assert_eq!(
            evaluate(&program(), 0x4000_0003, libc::SYS_read as u32, 0, 0),
            RET_KILL_PROCESS
        );
        #[cfg(target_arch = "x86_64")]
        assert_eq!(run(0x4000_0000 + libc::SYS_ptrace, 0), eperm);
        // With namespaces, sockets, setsid and SysV IPC are the network's,
        // the PID and the IPC namespace's to hold.
        assert_eq!(run(libc::SYS_setsid, 0), RET_ALLOW);
        for (name, nr) in denied_without_namespaces() {
            assert_eq!(run(nr, 0), RET_ALLOW, "{name}");
        }
        let udp = (
            libc::SYS_socket,
            libc::AF_INET as u64,
            libc::SOCK_DGRAM as u64,
        );
        assert_eq!(
            evaluate(&program(), AUDIT_ARCH.unwrap(), udp.0 as u32, udp.1, udp.2),
            RET_ALLOW
        );
    }

    #[test]
    fn without_namespaces_udp_raw_packet_sockets_and_setsid_are_refused() {
        let p = program_for(true);
        let eperm = RET_ERRNO | libc::EPERM as u32;
        let call = |nr: i64, a0: i64, a1: i64| {
            evaluate(&p, AUDIT_ARCH.unwrap(), nr as u32, a0 as u64, a1 as u64)
        };
        let socket = libc::SYS_socket;
        for (domain, ty, want) in [
            (libc::AF_INET, libc::SOCK_STREAM, RET_ALLOW),
            (
                libc::AF_INET6,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                RET_ALLOW,
            ),
            (libc::AF_UNIX, libc::SOCK_DGRAM, RET_ALLOW),
            (libc::AF_NETLINK, libc::SOCK_RAW, RET_ALLOW),
            (libc::AF_INET, libc::SOCK_DGRAM, eperm),
            (
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                eperm,
            ),
            (libc::AF_INET6, libc::SOCK_DGRAM, eperm),
            (libc::AF_INET, libc::SOCK_RAW, eperm),
            (libc::AF_PACKET, libc::SOCK_RAW, eperm),
        ] {
            assert_eq!(
                call(socket, domain as i64, ty as i64),
                want,
                "socket({domain}, {ty})"
            );
        }
        assert_eq!(call(libc::SYS_setsid, 0, 0), eperm);
        for (name, nr) in denied_without_namespaces() {
            assert_eq!(call(nr, 0, 0), eperm, "{name}");
        }
        // The rest is as with namespaces.
        assert_eq!(call(libc::SYS_ptrace, 0, 0), eperm);
        assert_eq!(call(libc::SYS_clone, libc::SIGCHLD as i64, 0), RET_ALLOW);
        assert_eq!(
            call(
                libc::SYS_clone,
                (libc::CLONE_NEWUSER | libc::SIGCHLD) as i64,
                0
            ),
            eperm
        );
        assert_eq!(call(libc::SYS_read, 0, 0), RET_ALLOW);
        assert_eq!(
            call(libc::SYS_clone3, 0, 0),
            RET_ERRNO | libc::ENOSYS as u32
        );
    }
}
