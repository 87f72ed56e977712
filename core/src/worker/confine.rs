//! The worker confines itself to its [`Confinement`] before it opens its library, so the
//! library's constructors run confined too. Each layer is the kernel's:
//!
//! - Landlock (files, TCP ports, scopes): read and execute only the system's libraries, the
//!   plugin's own files and what was granted; write only the scratch folder and what was
//!   granted, and make no device file anywhere; TCP `connect` and `bind` only to granted
//!   ports; no signal to a process outside the sandbox and no abstract Unix socket outside
//!   it. `no_new_privs` is set with it.
//! - capabilities: every one dropped, the bounding set emptied (a worker of a root host keeps
//!   user 0 and nothing more).
//! - seccomp: no `execve` and no new process unless `exec` was granted (threads are fine);
//!   sockets only for TCP (and UDP if granted), never Unix, raw or netlink sockets; no
//!   `setsid`/`setpgid` (what it starts stays in the group the host kills); another
//!   process's limits, priority, scheduling or memory never (the target must be 0 or the
//!   worker); no file metadata change (`chmod`, `chown`, extended attributes, times) and no
//!   inotify, which Landlock does not cover; none of the administrator's system calls
//!   (modules, mounts, `ptrace`, `bpf`, io_uring, keyrings, ...).
//! - the limits the host set before it started the worker (`RLIMIT_AS`, `RLIMIT_CPU`, its
//!   control group: `crate::isolation`).
//!
//! A denied operation fails inside the plugin as the error the kernel gives: `EACCES` from
//! Landlock, `EPERM` from seccomp and Landlock's scopes.

use crate::isolation::sandbox::Confinement;

/// What the sandbox enforces, in words, or why it cannot be applied (one line).
pub(super) type Confined = Result<String, String>;

/// Applies `plan` to this process (its only thread, before any other starts).
#[cfg(target_os = "linux")]
pub(super) fn confine(plan: &Confinement) -> Confined {
    let landlock = linux::landlock(plan)?;
    linux::drop_capabilities()?;
    linux::seccomp(plan)?;
    Ok(landlock)
}

/// No sandbox outside Linux: the tool is refused unless the user allows running it without.
#[cfg(not(target_os = "linux"))]
pub(super) fn confine(plan: &Confinement) -> Confined {
    match plan.weaker {
        true => Ok("not sandboxed: this system has no Landlock or seccomp ([sandbox] weaker = true allows it)".to_owned()),
        false => Err("this system cannot sandbox plugins (Landlock and seccomp are Linux's): set sandbox = \"off\" for the tool in toolhost.toml, or [sandbox] weaker = true to run sandboxed tools without a sandbox".to_owned()),
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeMap;

    use landlock::{
        path_beneath_rules, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible,
        NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
    };
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };

    use super::Confinement;
    use crate::config::Port;
    use crate::isolation::sandbox::DEVICES;

    /// The Landlock ABI whose features the sandbox uses: files with device ioctls (5), TCP
    /// ports (4), signal and abstract-socket scopes (6).
    const ABI_NEEDED: ABI = ABI::V6;

    const HOW_TO_WEAKEN: &str = "set [sandbox] weaker = true in toolhost.toml to run sandboxed tools with what this kernel enforces, or sandbox = \"off\" for the tool";

    /// Restricts files, TCP ports and scopes; returns what is enforced.
    pub(super) fn landlock(plan: &Confinement) -> Result<String, String> {
        let abi = ABI_NEEDED;
        let level = match plan.weaker {
            true => CompatLevel::BestEffort,
            false => CompatLevel::HardRequirement,
        };
        let cannot = |e: landlock::RulesetError| {
            format!(
                "this kernel cannot enforce the sandbox (Landlock ABI 6 is needed: files, TCP ports, signal and socket scopes): {e}; {HOW_TO_WEAKEN}"
            )
        };
        let mut net = BitFlags::<AccessNet>::empty();
        if !plan.connect.contains(&Port::Any) {
            net |= AccessNet::ConnectTcp;
        }
        if !plan.bind.contains(&Port::Any) {
            net |= AccessNet::BindTcp;
        }
        let mut ruleset = Ruleset::default()
            .set_compatibility(level)
            .handle_access(AccessFs::from_all(abi))
            .map_err(cannot)?;
        if !net.is_empty() {
            ruleset = ruleset.handle_access(net).map_err(cannot)?;
        }
        let created = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(cannot)?
            .create()
            .map_err(cannot)?;
        let rule_error = |e: landlock::RulesetError| format!("cannot add a sandbox rule: {e}");
        let read = AccessFs::from_read(abi);
        // Writing never includes making device files: a root worker could otherwise make a
        // node for the host's disk in its scratch folder and read it raw.
        let write = AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock);
        let mut created = created
            .add_rules(path_beneath_rules(&plan.read, read))
            .map_err(rule_error)?
            .add_rules(path_beneath_rules(DEVICES, AccessFs::from_all(abi)))
            .map_err(rule_error)?
            .add_rules(path_beneath_rules(&plan.write, write))
            .map_err(rule_error)?;
        for (ports, access) in [
            (&plan.connect, AccessNet::ConnectTcp),
            (&plan.bind, AccessNet::BindTcp),
        ] {
            for port in ports.iter() {
                if let Port::Number(n) = port {
                    created = created
                        .add_rule(NetPort::new(*n, access))
                        .map_err(rule_error)?;
                }
            }
        }
        let status = created.restrict_self().map_err(cannot)?;
        match (status.ruleset, plan.weaker) {
            (RulesetStatus::FullyEnforced, _) => Ok("sandboxed".to_owned()),
            (RulesetStatus::PartiallyEnforced, true) => Ok(format!(
                "partly sandboxed: this kernel's Landlock ({:?}) lacks some of ABI 6 (files, TCP ports, scopes); allowed by [sandbox] weaker = true",
                status.landlock
            )),
            (RulesetStatus::NotEnforced, true) => Ok(format!(
                "not sandboxed by Landlock: this kernel has none ({:?}); only seccomp applies; allowed by [sandbox] weaker = true",
                status.landlock
            )),
            (_, false) => Err(format!(
                "this kernel enforces only part of the sandbox ({:?}); {HOW_TO_WEAKEN}",
                status.landlock
            )),
        }
    }

    /// Gives up every capability, for good: a worker of a host that runs as root keeps the
    /// user id 0 (files owned by root stay its own) but loses what root may do beyond an
    /// owner (`CAP_DAC_OVERRIDE`, `CAP_SYS_RESOURCE`, `CAP_SYS_NICE`, `CAP_KILL`,
    /// `CAP_MKNOD`, `CAP_CHOWN`, `CAP_FOWNER`, ...). The bounding set is emptied too, so no
    /// program it may start gets one back (`no_new_privs` is set already). A worker without
    /// capabilities has nothing to drop: the bounding set then cannot change (`EPERM`), and
    /// that is no error.
    pub(super) fn drop_capabilities() -> Result<(), String> {
        // SAFETY: plain prctl calls with integer arguments.
        unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            );
            for cap in 0..64 {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) == -1 {
                    break; // EINVAL past the last capability; EPERM without CAP_SETPCAP
                }
            }
        }
        #[repr(C)]
        struct Header {
            version: u32,
            pid: libc::c_int,
        }
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        // _LINUX_CAPABILITY_VERSION_3: two 32-bit words of each set.
        let header = Header {
            version: 0x2008_0522,
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        // SAFETY: capset with a valid header and the two data words version 3 reads.
        match unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } {
            0 => Ok(()),
            _ => Err(format!(
                "cannot give up its capabilities: {}",
                std::io::Error::last_os_error()
            )),
        }
    }

    /// The ioctl requests that change a file's metadata: FS_IOC_SETFLAGS (and its 32-bit
    /// form), FS_IOC_FSSETXATTR, FS_IOC_SETVERSION (and its 32-bit form),
    /// FS_IOC_ENABLE_VERITY.
    const METADATA_IOCTLS: [u64; 6] = [
        0x4008_6602,
        0x4004_6602,
        0x401c_5820,
        0x4008_7602,
        0x4004_7602,
        0x4080_6685,
    ];

    // System calls newer than the C library's headers: their numbers are the same on every
    // architecture (the shared table from 424 on).
    const PROCESS_MRELEASE: i64 = 448;
    const FCHMODAT2: i64 = 452;
    const SETXATTRAT: i64 = 463;
    const REMOVEXATTRAT: i64 = 466;

    /// The x32 system calls of x86_64 carry this bit with the same architecture number.
    #[cfg(target_arch = "x86_64")]
    const X32: i64 = 0x4000_0000;

    /// Whether this kernel runs x32 system calls (`CONFIG_X86_X32_ABI`): `getpid` with the x32
    /// bit answers the process id there, and `ENOSYS` where the kernel has no x32 (most).
    #[cfg(target_arch = "x86_64")]
    fn x32_available() -> bool {
        // SAFETY: getpid takes no arguments and changes nothing.
        unsafe { libc::syscall(libc::SYS_getpid | X32) != -1 }
    }

    /// Installs the seccomp filters.
    pub(super) fn seccomp(plan: &Confinement) -> Result<(), String> {
        let arch = std::env::consts::ARCH
            .try_into()
            .map_err(|e| format!("cannot sandbox on {}: {e}", std::env::consts::ARCH))?;
        let compile = |rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32| {
            let filter = SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(errno as u32),
                arch,
            )
            .map_err(|e| format!("cannot build the seccomp filter: {e}"))?;
            seccompiler::BpfProgram::try_from(filter)
                .map_err(|e| format!("cannot compile the seccomp filter: {e}"))
        };
        // clone3 passes its flags in memory a filter cannot read: it answers ENOSYS, and the C
        // library falls back to clone, whose flags are checked below.
        let clone3 = compile(BTreeMap::from([(libc::SYS_clone3, vec![])]), libc::ENOSYS)?;
        let denied = compile(denied(plan)?, libc::EPERM)?;
        for program in [&clone3, &denied] {
            seccompiler::apply_filter(program)
                .map_err(|e| format!("cannot install the seccomp filter: {e}"))?;
        }
        Ok(())
    }

    fn condition(
        arg: u8,
        op: SeccompCmpOp,
        value: u64,
    ) -> Result<SeccompCondition, seccompiler::BackendError> {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
    }

    /// The system calls answered `EPERM`: a number with no rules is always denied; one with
    /// rules when any rule (all of its conditions) matches.
    fn denied(plan: &Confinement) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
        build(plan).map_err(|e| format!("cannot build the seccomp filter: {e}"))
    }

    /// The rules, keyed by system call number.
    type Rules = BTreeMap<i64, Vec<SeccompRule>>;

    fn build(plan: &Confinement) -> Result<Rules, seccompiler::BackendError> {
        let mut rules = Rules::new();
        refuse_system_calls(&mut rules);
        limit_processes(plan, &mut rules)?;
        refuse_other_processes(&mut rules)?;
        refuse_metadata(&mut rules)?;
        limit_sockets(plan, &mut rules)?;
        #[cfg(target_arch = "x86_64")]
        if x32_available() {
            through_x32(plan, &mut rules);
        }
        Ok(rules)
    }

    /// What no tool may do: debug or read other processes, load kernel code, mount, change
    /// the clock or the host's name, and the kernel interfaces a sandbox cannot see into.
    fn refuse_system_calls(rules: &mut Rules) {
        let always = [
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
            libc::SYS_kexec_load,
            libc::SYS_kexec_file_load,
            libc::SYS_reboot,
            libc::SYS_swapon,
            libc::SYS_swapoff,
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_chroot,
            libc::SYS_setns,
            libc::SYS_unshare,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_userfaultfd,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_acct,
            libc::SYS_settimeofday,
            libc::SYS_clock_settime,
            libc::SYS_clock_adjtime,
            libc::SYS_adjtimex,
            libc::SYS_sethostname,
            libc::SYS_setdomainname,
            libc::SYS_name_to_handle_at,
            libc::SYS_open_by_handle_at,
            libc::SYS_quotactl,
            libc::SYS_syslog,
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_fanotify_init,
            libc::SYS_move_mount,
            libc::SYS_open_tree,
            libc::SYS_fsopen,
            libc::SYS_fsmount,
        ];
        for nr in always {
            rules.insert(nr, vec![]);
        }
        #[cfg(target_arch = "x86_64")]
        for nr in [libc::SYS_iopl, libc::SYS_ioperm] {
            rules.insert(nr, vec![]);
        }
    }

    /// New namespaces and processes (unless `exec` is granted), and leaving the worker's
    /// group.
    fn limit_processes(
        plan: &Confinement,
        rules: &mut Rules,
    ) -> Result<(), seccompiler::BackendError> {
        use SeccompCmpOp::MaskedEq;
        // New namespaces, even where new processes are allowed.
        let namespaces = [
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWNS,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWCGROUP,
            // A child whose parent is the worker's parent (the host), which would never reap
            // it.
            libc::CLONE_PARENT,
        ];
        let mut clone = Vec::new();
        for flag in namespaces {
            let flag = flag as u64;
            clone.push(SeccompRule::new(vec![condition(0, MaskedEq(flag), flag)?])?);
        }
        if !plan.exec {
            let thread = libc::CLONE_THREAD as u64;
            clone.push(SeccompRule::new(vec![condition(0, MaskedEq(thread), 0)?])?);
            for nr in [libc::SYS_execve, libc::SYS_execveat] {
                rules.insert(nr, vec![]);
            }
            #[cfg(target_arch = "x86_64")]
            for nr in [libc::SYS_fork, libc::SYS_vfork] {
                rules.insert(nr, vec![]);
            }
        }
        rules.insert(libc::SYS_clone, clone);
        // Leaving the worker's process group or session: whatever it starts stays in the
        // group the host kills when the worker ends (the worker made its group before the
        // filter, in the host's `pre_exec`).
        for nr in [libc::SYS_setsid, libc::SYS_setpgid] {
            rules.insert(nr, vec![]);
        }
        Ok(())
    }

    /// Acting on another process: its limits, priority, scheduling and memory, its
    /// descriptors through a pidfd.
    fn refuse_other_processes(rules: &mut Rules) -> Result<(), seccompiler::BackendError> {
        use SeccompCmpOp::Ne;
        // Another process's limits, priority, scheduling and memory: only the worker's own
        // (0 or its process id). Lowering the host's file-size limit killed it (SIGXFSZ) at
        // its next audit write.
        let own = u64::from(std::process::id());
        let other = |arg: u8| -> Result<Vec<SeccompCondition>, seccompiler::BackendError> {
            Ok(vec![condition(arg, Ne, 0)?, condition(arg, Ne, own)?])
        };
        for nr in [
            libc::SYS_prlimit64,
            libc::SYS_sched_setattr,
            libc::SYS_sched_setscheduler,
            libc::SYS_sched_setparam,
            libc::SYS_sched_setaffinity,
            libc::SYS_migrate_pages,
            libc::SYS_move_pages,
        ] {
            rules.insert(nr, vec![SeccompRule::new(other(0)?)?]);
        }
        // setpriority(which, who, prio) and ioprio_set(which, who, prio): a process by its id
        // (PRIO_PROCESS 0, IOPRIO_WHO_PROCESS 1) only, and that process the worker.
        for (nr, process) in [(libc::SYS_setpriority, 0), (libc::SYS_ioprio_set, 1)] {
            rules.insert(
                nr,
                vec![
                    SeccompRule::new(vec![condition(0, Ne, process)?])?,
                    SeccompRule::new(other(1)?)?,
                ],
            );
        }
        // Another process's descriptors and memory through a pidfd, and comparing kernel
        // objects across processes.
        for nr in [
            libc::SYS_pidfd_getfd,
            libc::SYS_process_madvise,
            PROCESS_MRELEASE,
            libc::SYS_kcmp,
        ] {
            rules.insert(nr, vec![]);
        }
        Ok(())
    }

    /// Changing a file's metadata, directly or through ioctl, and watching files.
    fn refuse_metadata(rules: &mut Rules) -> Result<(), seccompiler::BackendError> {
        use SeccompCmpOp::Eq;
        // File metadata: Landlock does not check a mode, an owner, an extended attribute or
        // a time, and a filter cannot read the path or how a descriptor was opened (a file
        // opened to read may be chmod-ed through it), so these are refused everywhere, the
        // scratch folder and write grants included. Files are made with the mode given to
        // `open` and `mkdir`.
        for nr in [
            libc::SYS_fchmod,
            libc::SYS_fchmodat,
            FCHMODAT2,
            libc::SYS_fchown,
            libc::SYS_fchownat,
            libc::SYS_setxattr,
            libc::SYS_lsetxattr,
            libc::SYS_fsetxattr,
            libc::SYS_removexattr,
            libc::SYS_lremovexattr,
            libc::SYS_fremovexattr,
            SETXATTRAT,
            REMOVEXATTRAT,
            libc::SYS_utimensat,
            // Watching files: inotify sees the names of files made in any folder it can
            // name, grants or not.
            libc::SYS_inotify_init1,
            libc::SYS_inotify_add_watch,
        ] {
            rules.insert(nr, vec![]);
        }
        // The same through ioctl: a file's flags (immutable, append-only), its project and
        // extended flags, its version, fs-verity. The request is the low 32 bits the kernel
        // reads.
        let mut ioctl = Vec::new();
        for request in METADATA_IOCTLS {
            ioctl.push(SeccompRule::new(vec![condition(1, Eq, request)?])?);
        }
        rules.insert(libc::SYS_ioctl, ioctl);
        #[cfg(target_arch = "x86_64")]
        for nr in [
            libc::SYS_chmod,
            libc::SYS_chown,
            libc::SYS_lchown,
            libc::SYS_utime,
            libc::SYS_utimes,
            libc::SYS_futimesat,
            libc::SYS_inotify_init,
        ] {
            rules.insert(nr, vec![]);
        }
        Ok(())
    }

    /// The sockets a tool may open.
    fn limit_sockets(
        plan: &Confinement,
        rules: &mut Rules,
    ) -> Result<(), seccompiler::BackendError> {
        use SeccompCmpOp::{Eq, MaskedEq, Ne};
        // Sockets: only TCP over IPv4 and IPv6 (which Landlock filters by port), and UDP if
        // granted; no Unix socket (a path such as a container runtime's socket is not a file
        // Landlock checks on connect), no netlink, packet or raw socket.
        let (inet, inet6) = (libc::AF_INET as u64, libc::AF_INET6 as u64);
        let mut socket = vec![SeccompRule::new(vec![
            condition(0, Ne, inet)?,
            condition(0, Ne, inet6)?,
        ])?];
        let mut types = vec![
            libc::SOCK_RAW,
            libc::SOCK_RDM,
            libc::SOCK_SEQPACKET,
            libc::SOCK_DCCP,
            // SOCK_PACKET, deprecated in the C headers but still a socket type.
            10,
        ];
        if !plan.udp {
            types.push(libc::SOCK_DGRAM);
        }
        for domain in [inet, inet6] {
            for kind in &types {
                socket.push(SeccompRule::new(vec![
                    condition(0, Eq, domain)?,
                    condition(1, MaskedEq(0xf), *kind as u64)?,
                ])?);
            }
            // TCP's relatives that Landlock's TCP rules may not see.
            for protocol in [libc::IPPROTO_SCTP, libc::IPPROTO_MPTCP] {
                socket.push(SeccompRule::new(vec![
                    condition(0, Eq, domain)?,
                    condition(2, Eq, protocol as u64)?,
                ])?);
            }
        }
        rules.insert(libc::SYS_socket, socket);
        Ok(())
    }

    /// The same calls through the x32 ABI, where the kernel has it.
    #[cfg(target_arch = "x86_64")]
    fn through_x32(plan: &Confinement, rules: &mut Rules) {
        // The same calls through the x32 ABI, where the kernel has it: their numbers with
        // the x32 bit (execve and execveat have x32 numbers of their own).
        let native: Vec<(i64, Vec<SeccompRule>)> =
            rules.iter().map(|(n, r)| (*n, r.clone())).collect();
        for (nr, rule) in native {
            rules.insert(nr | X32, rule);
        }
        if !plan.exec {
            rules.insert(520 | X32, vec![]);
            rules.insert(545 | X32, vec![]);
        }
        // x32's own numbers for calls refused above: ptrace, kexec_load, move_pages,
        // process_vm_readv and _writev; and its ioctl, refused whole (no x86_64
        // program needs it).
        for nr in [521, 528, 533, 539, 540, 514] {
            rules.insert(nr | X32, vec![]);
        }
    }
}
