//! The provider on a host shared by several users (docs/loopback.md, "Security model"): a
//! victim and an attacker run as two throw-away users made for each test (`useradd`), as
//! processes of this test binary started with their uid (`role_entry`, `SEC_ROLE`). The
//! attacker plays by the rules of the file system only; a "rogue" process of the victim's own
//! user speaks the wire format directly (`urma_datapath::message`) where a check must hold
//! even against a process of the same user.
//!
//! Needs root (to make users and run processes as them). Without root every test says so and
//! passes, unless `URMA_SECURITY_REQUIRED` is set (as `make test` sets it): then it fails.
#![allow(clippy::field_reassign_with_default)]

mod common;
use common::*;

use std::ffi::CString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use urma_datapath::message::{self, Hdr, Piece};

/// The bound of every wait for another process (scaled under an emulator).
fn t() -> Duration {
    Duration::from_secs(15) * testkit::target::slowdown()
}

fn scaled(ms: u64) -> Duration {
    Duration::from_millis(ms) * testkit::target::slowdown()
}

// ---------------------------------------------------------------- throw-away users

const PREFIX: &str = "ulbs";

struct Account {
    name: String,
    uid: u32,
    gid: u32,
}

/// Two users and the directories made for one test; all removed on drop, whatever happened.
struct Host {
    victim: Account,
    attacker: Account,
    /// A directory of root (mode 0755) for this test's paths.
    base: PathBuf,
    _serial: std::sync::MutexGuard<'static, ()>,
}

fn run_quiet(cmd: &str, args: &[&str]) -> bool {
    std::process::Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn passwd_entries() -> Vec<(String, u32, u32)> {
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((
                f.first()?.to_string(),
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect()
}

/// Removes the users of earlier runs of this suite whose process is gone.
fn sweep_stale_users() {
    for (name, _, _) in passwd_entries() {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !pid.is_empty() && !Path::new(&format!("/proc/{pid}")).exists() {
            run_quiet("userdel", &[&name]);
        }
    }
}

fn make_user(tag: char) -> Account {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "{PREFIX}{}{tag}{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let ok = run_quiet(
        "useradd",
        &[
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            &name,
        ],
    );
    assert!(
        ok,
        "useradd {name} failed (is the passwd package installed?)"
    );
    let (_, uid, gid) = passwd_entries()
        .into_iter()
        .find(|e| e.0 == name)
        .expect("the new user is in /etc/passwd");
    Account { name, uid, gid }
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The test's host, or `None` (the test is skipped) when not root and not required.
fn host() -> Option<Host> {
    static SERIAL: Mutex<()> = Mutex::new(());
    if !is_root() {
        assert!(
            std::env::var_os("URMA_SECURITY_REQUIRED").is_none(),
            "the security suite must run as root (URMA_SECURITY_REQUIRED is set)"
        );
        eprintln!("security: skipped, needs root to make users");
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    sweep_stale_users();
    static N: AtomicU32 = AtomicU32::new(0);
    let base = PathBuf::from(format!(
        "/dev/shm/{PREFIX}{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let h = Host {
        victim: make_user('v'),
        attacker: make_user('a'),
        base,
        _serial: serial,
    };
    // Both users must be able to run this binary and load the provider: in place, or else
    // (a checkout under a private home directory) as copies in this test's directory.
    *lock_image() = Some(Image::in_place());
    if !says_hello(&h.victim) {
        *lock_image() = Some(Image::copied_into(&h.base.join("image")));
        assert!(
            says_hello(&h.victim),
            "a process run as {} cannot start this test binary or load liburma.so.0, \
             in place or copied to {}",
            h.victim.name,
            h.base.join("image").display()
        );
    }
    Some(h)
}

/// What the role processes run: this test binary and the loader path of the provider.
#[derive(Clone)]
struct Image {
    exe: PathBuf,
    /// `LD_LIBRARY_PATH` for them (`None`: this process's).
    ld_path: Option<std::ffi::OsString>,
}

impl Image {
    fn in_place() -> Image {
        Image {
            exe: std::env::current_exe().unwrap(),
            ld_path: None,
        }
    }

    /// Copies of this binary and of the loopback `liburma.so.0` in `dir` (mode 0755), which
    /// every user can reach.
    fn copied_into(dir: &Path) -> Image {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let exe = dir.join("security");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let lib = testkit::target::loopback_dir()
            .expect("the loopback's liburma.so.0 on LD_LIBRARY_PATH")
            .join("liburma.so.0");
        std::fs::copy(&lib, dir.join("liburma.so.0")).unwrap();
        let mut path = vec![dir.to_path_buf()];
        if let Some(p) = std::env::var_os("LD_LIBRARY_PATH") {
            path.extend(std::env::split_paths(&p));
        }
        Image {
            exe,
            ld_path: Some(std::env::join_paths(path).unwrap()),
        }
    }
}

/// The image the role processes run (set by [`host`]; in place until then).
fn lock_image() -> std::sync::MutexGuard<'static, Option<Image>> {
    static IMAGE: Mutex<Option<Image>> = Mutex::new(None);
    IMAGE.lock().unwrap_or_else(|e| e.into_inner())
}

fn image() -> Image {
    lock_image().clone().unwrap_or_else(Image::in_place)
}

/// Whether a role process run as `who` starts and answers.
fn says_hello(who: &Account) -> bool {
    let img = image();
    let mut cmd = testkit::target::command(&img.exe);
    cmd.args(["--exact", "role_entry", "--nocapture"])
        .env("SEC_ROLE", "hello")
        .uid(who.uid)
        .gid(who.gid);
    if let Some(p) = &img.ld_path {
        cmd.env("LD_LIBRARY_PATH", p);
    }
    cmd.output().is_ok_and(|o| {
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("SEC hello")
    })
}

impl Host {
    /// A private directory of `who` under this test's base (a provider directory).
    fn private_dir(&self, name: &str, who: &Account) -> PathBuf {
        let d = self.base.join(name);
        std::fs::create_dir(&d).unwrap();
        chown(&d, who);
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    /// The default provider directory of `who`.
    fn default_dir(who: &Account) -> PathBuf {
        PathBuf::from(format!("/dev/shm/urma-loopback-{}", who.uid))
    }
}

fn chown(p: &Path, who: &Account) {
    let c = CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; lchown does not keep it.
    assert_eq!(unsafe { libc::lchown(c.as_ptr(), who.uid, who.gid) }, 0);
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
        for a in [&self.victim, &self.attacker] {
            let _ = std::fs::remove_dir_all(Host::default_dir(a));
            run_quiet("userdel", &[&a.name]);
        }
    }
}

// ---------------------------------------------------------------- processes

/// A process of this binary in one role, talked to over its standard input and output.
struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
    err: Option<std::thread::JoinHandle<String>>,
}

impl Proc {
    fn start(role: &str, who: Option<&Account>, env: &[(&str, String)]) -> Proc {
        Proc::start_in(role, who, env, false)
    }

    /// As [`Proc::start`]; with `new_pid_ns` the process runs in a pid namespace of its own
    /// (`unshare --pid --fork`, which also sets its uid and gid).
    fn start_in(
        role: &str,
        who: Option<&Account>,
        env: &[(&str, String)],
        new_pid_ns: bool,
    ) -> Proc {
        let img = image();
        let mut cmd = testkit::target::command(&img.exe);
        if new_pid_ns {
            let inner = cmd;
            cmd = std::process::Command::new("unshare");
            cmd.args(["--pid", "--fork", "--kill-child"]);
            if let Some(a) = who {
                cmd.arg(format!("--setgid={}", a.gid))
                    .arg(format!("--setuid={}", a.uid));
            }
            cmd.arg(inner.get_program()).args(inner.get_args());
        }
        if let Some(p) = &img.ld_path {
            cmd.env("LD_LIBRARY_PATH", p);
        }
        cmd.args(["--exact", "role_entry", "--nocapture"])
            .env("SEC_ROLE", role)
            .env_remove("URMA_LOOPBACK_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some(a) = who.filter(|_| !new_pid_ns) {
            // std drops root's supplementary groups when it changes the uid.
            cmd.uid(a.uid).gid(a.gid);
        }
        let mut child = cmd.spawn().expect("start a role process");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                // The harness may print "test role_entry ... " before the first line.
                if let Some((_, rest)) = l.split_once("SEC ") {
                    if tx.send(rest.to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        let mut e = child.stderr.take().unwrap();
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = e.read_to_string(&mut s);
            s
        });
        Proc {
            child,
            lines,
            err: Some(err),
        }
    }

    fn say(&mut self, line: &str) {
        let i = self.child.stdin.as_mut().unwrap();
        writeln!(i, "{line}").unwrap();
        i.flush().unwrap();
    }

    /// The process's next line, as words (bounded wait).
    fn hear(&mut self) -> Vec<String> {
        match self.lines.recv_timeout(t()) {
            Ok(l) => l.split_whitespace().map(str::to_string).collect(),
            Err(e) => {
                let _ = self.child.kill();
                let err = self
                    .err
                    .take()
                    .map(|j| j.join().unwrap())
                    .unwrap_or_default();
                panic!("the role process did not answer ({e}); its standard error:\n{err}");
            }
        }
    }

    /// Says `line` and returns the numbers of the answer (after its first word, which must be
    /// `what`).
    fn ask(&mut self, line: &str, what: &str) -> Vec<i64> {
        self.say(line);
        let w = self.hear();
        assert_eq!(w[0], what, "answer to {line:?}: {w:?}");
        w[1..].iter().map(|x| x.parse().unwrap()).collect()
    }

    /// Ends the process (closing its input) and returns what it wrote on standard error.
    fn finish(mut self) -> String {
        drop(self.child.stdin.take());
        let st = self.child.wait().unwrap();
        let err = self
            .err
            .take()
            .map(|j| j.join().unwrap())
            .unwrap_or_default();
        assert!(st.success(), "the role process failed: {st}\n{err}");
        err
    }
}

fn say(words: &[String]) {
    println!("SEC {}", words.join(" "));
}

macro_rules! say {
    ($($w:expr),* $(,)?) => { say(&[$($w.to_string()),*]) };
}

fn hear_cmd() -> Option<Vec<String>> {
    let mut l = String::new();
    if std::io::stdin().read_line(&mut l).ok()? == 0 {
        return None;
    }
    Some(l.split_whitespace().map(str::to_string).collect())
}

fn num(w: &str) -> u64 {
    w.parse().unwrap_or_else(|_| panic!("not a number: {w}"))
}

/// Entry of the role processes (does nothing unless started by a test below with `SEC_ROLE`).
#[test]
fn role_entry() {
    match std::env::var("SEC_ROLE").as_deref() {
        Ok("hello") => say!("hello"),
        Ok("victim") => victim(),
        Ok("rogue") => rogue(),
        Ok("squatter") => squatter(),
        Ok("deaf") => deaf(),
        Ok("liar") => liar(),
        Ok("guesser") => guess_for_a_while(),
        _ => {}
    }
}

// ---------------------------------------------------------------- the victim: the public API

const MAIN_LEN: usize = 64 << 10;

fn pattern(i: usize) -> u8 {
    (i * 13 + 5) as u8
}

/// A process using the provider as an application does: a segment (filled with a pattern), a
/// second segment, a jetty with recv WRs posted, a JFS; it imports and writes on command.
fn victim() {
    let _g = serial();
    let mut main = Seg::rw(MAIN_LEN);
    main.buf
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = pattern(i));
    let mut other = Some(Seg::rw(4096));
    // SAFETY: the fixture context is live; the helpers check every handle they create.
    let (rjfc, jetty, sjfc, jfs) = unsafe {
        let r = jfc(64, std::ptr::null_mut());
        let s = jfc(64, std::ptr::null_mut());
        (r, jetty(r, 16), s, jfs(s))
    };
    let recv_buf = Seg::rw(4096);
    for i in 0..8 {
        assert_eq!(post_jetty_recv(jetty, i, Some((&recv_buf, 4096))), 0);
    }
    // SAFETY: the handles are live.
    let (g, jid) = unsafe { ((*main.tseg).seg, (*jetty).jetty_id.id) };
    let (uasid, va, len, token_id) = (g.ubva.uasid, g.ubva.va, g.len, g.token_id);
    say!("ready", uasid, va, len, token_id, jid);
    let mut imported: Vec<(u64, *mut u::urma_target_seg_t)> = Vec::new();
    let mut main = Some(main);
    while let Some(w) = hear_cmd() {
        match w[0].as_str() {
            "import" => {
                let t0 = Instant::now();
                let r = import_seg(&w[1..6]);
                let ms = t0.elapsed().as_millis();
                if !r.is_null() {
                    imported.push((num(&w[2]), r));
                }
                say!("import", u8::from(!r.is_null()), ms);
            }
            "import_pair" => {
                // Two imports at once, from two threads: (ok, ms) of each.
                let (a, b) = (w[1..6].to_vec(), w[6..11].to_vec());
                let ta = std::thread::spawn(move || timed_import(&a));
                let tb = std::thread::spawn(move || timed_import(&b));
                let (ra, rb) = (ta.join().unwrap(), tb.join().unwrap());
                say!("pair", ra.0, ra.1, rb.0, rb.1);
            }
            "write_last" => {
                let (va, rseg) = *imported.last().expect("an import");
                let src = other.as_ref().expect("the second segment");
                let mut s = sge(src.addr(), num(&w[1]) as u32, src.tseg);
                let mut d = sge(va, num(&w[1]) as u32, rseg);
                let mut wr = rw_wr(
                    u::URMA_OPC_WRITE,
                    &mut s,
                    &mut d,
                    std::ptr::null_mut(),
                    7,
                    true,
                );
                assert_eq!(post(jfs, &mut wr).0, 0);
                let crs = poll_n(sjfc, 1, t());
                say!("cr", crs.first().map_or(-1, |c| i64::from(c.status)));
            }
            "rw_last" => {
                // rw_last <write|read> <n>: one WR of n bytes with the last import; the status
                // and length of its CR.
                let (va, rseg) = *imported.last().expect("an import");
                let local = other.as_ref().expect("the second segment");
                let n = num(&w[2]) as u32;
                let mut l = sge(local.addr(), n, local.tseg);
                let mut r = sge(va, n, rseg);
                let (op, s, d) = if w[1] == "read" {
                    (READ, &mut r, &mut l)
                } else {
                    (WRITE, &mut l, &mut r)
                };
                let mut wr = rw_wr(op, s, d, std::ptr::null_mut(), 9, true);
                assert_eq!(post(jfs, &mut wr).0, 0);
                let crs = poll_n(sjfc, 1, t());
                let c = crs.first();
                say!(
                    "cr",
                    c.map_or(-1, |c| i64::from(c.status)),
                    c.map_or(-1, |c| i64::from(c.completion_len))
                );
            }
            "unreg_other" | "unreg_main" => {
                let s = if w[0] == "unreg_main" {
                    main.take()
                } else {
                    other.take()
                };
                let t0 = Instant::now();
                drop(s);
                say!("took_ms", t0.elapsed().as_millis());
            }
            "recvs" => {
                let crs = poll_n(rjfc, 8, Duration::from_millis(num(&w[1])));
                let mut out = vec!["recvs".to_string(), crs.len().to_string()];
                out.extend(crs.iter().map(|c| {
                    let r = c.remote_id;
                    format!("{}:{}:{}", r.uasid, c.status, imm(c))
                }));
                say(&out);
            }
            "intact" => {
                let ok = main
                    .as_ref()
                    .is_some_and(|m| m.buf.iter().enumerate().all(|(i, &b)| b == pattern(i)));
                say!("intact", u8::from(ok));
            }
            "threads" => say!("threads", threads()),
            "counters" => {
                let c = counters();
                say!("counters", c.peer_refusals, c.peer_refused_objects);
            }
            _ => panic!("victim: unknown command {w:?}"),
        }
    }
    let _ = (rjfc, sjfc, recv_buf);
}

fn threads() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .map(|v| num(v.trim()))
        .unwrap()
}

/// `urma_import_seg` of `[uasid, va, len, token_id, token]`.
fn import_seg(w: &[String]) -> *mut u::urma_target_seg_t {
    let mut g = u::urma_seg_t::default();
    // SAFETY: lb().ctx is the live fixture context.
    g.ubva.eid = unsafe { (*lb().ctx).eid };
    g.ubva.uasid = num(&w[0]) as u32;
    g.ubva.va = num(&w[1]);
    g.len = num(&w[2]);
    g.token_id = num(&w[3]) as u32;
    g.attr.value = u::URMA_TOKEN_PLAIN_TEXT;
    let mut tok = u::urma_token_t {
        token: num(&w[4]) as u32,
    };
    // SAFETY: g and tok are locals alive for the call; the loopback copies them.
    unsafe { u::urma_import_seg(lb().ctx, &mut g, &mut tok, 0, Default::default()) }
}

fn timed_import(w: &[String]) -> (u8, u128) {
    let t0 = Instant::now();
    let r = import_seg(w);
    (u8::from(!r.is_null()), t0.elapsed().as_millis())
}

/// What a victim's `ready` line tells: uasid, va, len, token id, jetty id.
struct Published {
    uasid: u64,
    va: u64,
    len: u64,
    token_id: u64,
    jetty: u64,
}

impl Published {
    fn of(p: &mut Proc) -> Published {
        let w = p.hear();
        assert_eq!(w[0], "ready", "{w:?}");
        let n: Vec<u64> = w[1..].iter().map(|x| num(x)).collect();
        Published {
            uasid: n[0],
            va: n[1],
            len: n[2],
            token_id: n[3],
            jetty: n[4],
        }
    }

    /// The `import` command for this segment, presenting `token`.
    fn import(&self, token: u32) -> String {
        format!(
            "import {} {} {} {} {token}",
            self.uasid, self.va, self.len, self.token_id
        )
    }
}

fn in_dir(d: &Path) -> Vec<(&'static str, String)> {
    vec![("URMA_LOOPBACK_DIR", d.display().to_string())]
}

/// A process of `role` run as the victim user in directory `d` (`None`: the default one) with
/// the extra variables `env`.
fn as_victim(h: &Host, role: &str, d: Option<&Path>, env: &[(&str, &str)]) -> Proc {
    let mut e = d.map(in_dir).unwrap_or_default();
    e.extend(env.iter().map(|&(k, v)| (k, v.to_string())));
    Proc::start(role, Some(&h.victim), &e)
}

/// A victim process (see [`victim`]) and what it published.
fn victim_in(h: &Host, d: Option<&Path>, env: &[(&str, &str)]) -> (Proc, Published) {
    let mut p = as_victim(h, "victim", d, env);
    let me = Published::of(&mut p);
    (p, me)
}

// ---------------------------------------------------------------- the attacker: file system only

/// Another user's process that makes itself a provider directory at `SQUAT_DIR` (mode 0777, so
/// the victim could write there) unless it exists, and listens on `<SQUAT_N>.sock` in it,
/// counting the connections and bytes it receives.
fn squatter() {
    let d = PathBuf::from(std::env::var("SQUAT_DIR").unwrap());
    if !d.exists() {
        std::fs::create_dir(&d).unwrap();
    }
    let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777));
    let sock = d.join(format!("{}.sock", std::env::var("SQUAT_N").unwrap()));
    let l = UnixListener::bind(&sock).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    let conns = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let (c2, b2) = (conns.clone(), bytes.clone());
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            c2.fetch_add(1, Ordering::SeqCst);
            let b3 = b2.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    b3.fetch_add(n as u64, Ordering::SeqCst);
                }
            });
        }
    });
    say!("ready");
    while let Some(w) = hear_cmd() {
        assert_eq!(w[0], "report");
        say!(
            "got",
            conns.load(Ordering::SeqCst),
            bytes.load(Ordering::SeqCst)
        );
    }
}

/// A process of the victim's user that holds a slot and answers on its socket as an owner,
/// except for its acknowledgements of work requests (`LIAR_ACK`): `len` acknowledges every
/// request as 0xFFFF_FFF0 bytes, `status` with a CR status that does not exist, `short` a READ
/// of n bytes with n - 1 bytes (and sends them). `report` tells how many lies it told and how
/// many of those connections the requester closed right after.
fn liar() {
    let (d, me, _slot) = dir_and_slot();
    let mode = std::env::var("LIAR_ACK").unwrap();
    let path = d.join(format!("{me}.sock"));
    let _ = std::fs::remove_file(&path);
    let l = UnixListener::bind(&path).unwrap();
    let told = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let t2 = told.clone();
    std::thread::spawn(move || {
        for s in l.incoming().map_while(Result::ok) {
            let (told, mode) = (t2.clone(), mode.clone());
            std::thread::spawn(move || lie(s, &mode, &told));
        }
    });
    say!("ready", me);
    while let Some(w) = hear_cmd() {
        assert_eq!(w[0], "report");
        // Give the requester's reader its moment to close.
        std::thread::sleep(Duration::from_millis(300));
        say!(
            "liar",
            told.0.load(Ordering::SeqCst),
            told.1.load(Ordering::SeqCst)
        );
    }
}

/// One connection of [`liar`]: (lies told, connections closed by the requester after one).
fn lie(mut s: UnixStream, mode: &str, told: &(AtomicU64, AtomicU64)) {
    let ack = |s: &mut UnixStream, h: Hdr| s.write_all(&h.encode()).is_ok();
    if read_hdr(&mut s).is_none_or(|h| h.kind != message::K_HELLO) {
        return;
    }
    let hi = Hdr {
        kind: message::K_ACK,
        a: message::VERSION,
        ..Hdr::default()
    };
    if !ack(&mut s, hi) {
        return;
    }
    while let Some(h) = read_hdr(&mut s) {
        let mut pieces = vec![0u8; h.ndst as usize * message::PIECE_LEN];
        if s.read_exact(&mut pieces).is_err() {
            return;
        }
        if h.kind == message::K_IMPORT_SEG {
            let a = Hdr {
                kind: message::K_ACK,
                status: message::IMPORT_OK,
                a: u64::from(u::URMA_ACCESS_READ | u::URMA_ACCESS_WRITE),
                b: u64::from(u::URMA_TOKEN_PLAIN_TEXT),
                c: h.c,
                ..Hdr::default()
            };
            if !ack(&mut s, a) {
                return;
            }
            continue;
        }
        let read = h.opcode == READ;
        if !read {
            let mut payload = vec![0u8; h.len as usize];
            if s.read_exact(&mut payload).is_err() {
                return;
            }
        }
        let mut a = Hdr {
            kind: message::K_ACK,
            len: h.len,
            ..Hdr::default()
        };
        match mode {
            "len" => a.len = 0xFFFF_FFF0,
            "status" => a.status = 999,
            _ => a.len = h.len - 1,
        }
        if !ack(&mut s, a) {
            return;
        }
        told.0.fetch_add(1, Ordering::SeqCst);
        s.set_read_timeout(Some(Duration::from_millis(1000)))
            .unwrap();
        s.set_write_timeout(Some(Duration::from_millis(1000)))
            .unwrap();
        // A READ's bytes follow (as many as claimed, at most 1 MiB). The requester sends
        // nothing more unless asked: a write it refuses, end-of-file or a reset here means it
        // closed the connection because of the lie.
        let bytes = if read && a.status == 0 {
            a.len.min(1 << 20) as usize
        } else {
            0
        };
        let closed = s.write_all(&vec![0x5a; bytes]).is_err()
            || match s.read(&mut [0u8; 1]) {
                Ok(0) => true,
                Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
                Ok(_) => false,
            };
        if closed {
            told.1.fetch_add(1, Ordering::SeqCst);
        }
        return;
    }
}

// ---------------------------------------------------------------- the rogue: raw wire format

/// A process of the victim's user that holds a slot of the directory (so it can open
/// connections under its own uasid) and writes messages of its choosing.
fn rogue() {
    let (d, me, _slot) = dir_and_slot();
    say!("ready", me);
    let mut conns: Vec<UnixStream> = Vec::new();
    let stolen: Stolen = Arc::default();
    while let Some(w) = hear_cmd() {
        match w[0].as_str() {
            // connect <uasid> <claimed uasid>: HELLO naming `claimed`; the answer's status or -1.
            "connect" => {
                let claimed = if w[2] == "me" { me } else { num(&w[2]) as u32 };
                match hello(&d, num(&w[1]) as u32, claimed) {
                    Some(s) => {
                        conns.push(s);
                        say!("hello", 0);
                    }
                    None => say!("hello", -1),
                }
            }
            // rawopen <uasid> <n>: n connections that never say anything.
            "rawopen" => {
                let sock = d.join(format!("{}.sock", w[1]));
                let opened = (0..num(&w[2]))
                    .filter_map(|_| UnixStream::connect(&sock).ok())
                    .map(|s| conns.push(s))
                    .count();
                say!("opened", opened);
            }
            // send <fields...>: one message on the last connection (see `Msg::parse`).
            "send" => {
                let m = Msg::parse(&w[1..]);
                let s = conns.last_mut().expect("a connection");
                say(&m.send(s));
            }
            // imp <token_id> <va> <len> <token>: a segment import on the last connection.
            "imp" => {
                let h = Hdr {
                    kind: message::K_IMPORT_SEG,
                    a: num(&w[1]),
                    b: num(&w[2]),
                    c: num(&w[3]),
                    token: num(&w[4]) as u32,
                    token_given: 1,
                    ..Hdr::default()
                };
                let m = Msg {
                    h,
                    pieces: Vec::new(),
                    sent: 0,
                };
                say(&m.send(conns.last_mut().expect("a connection")));
            }
            // fuzz <uasid> <seed> <count> <token_id> <va>
            "fuzz" => {
                let target = Target {
                    dir: &d,
                    me,
                    uasid: num(&w[1]) as u32,
                    token_id: num(&w[4]) as u32,
                    va: num(&w[5]),
                };
                say!("fuzzed", fuzz(&target, num(&w[2]), num(&w[3])));
            }
            // connect_n <uasid> <n>: n connections opened with HELLO under its own uasid; how
            // many were admitted.
            "connect_n" => {
                let admitted = (0..num(&w[2]))
                    .filter_map(|_| hello(&d, num(&w[1]) as u32, me))
                    .map(|s| conns.push(s))
                    .count();
                say!("admitted", admitted);
            }
            // eof_ms: how long the first connection stays open without a word from this side.
            "eof_ms" => {
                let t0 = Instant::now();
                let s = conns.first_mut().expect("a connection");
                s.set_read_timeout(Some(t())).unwrap();
                let _ = s.read(&mut [0u8; 1]);
                say!("eof_ms", t0.elapsed().as_millis());
            }
            // guess <uasid> <token_id> <va> <ms>: wrong tokens in segment imports for ms
            // milliseconds, reconnecting whenever the owner closes; refusals, connections.
            "guess" => {
                let (refused, opened) = guess(&d, me, &w[1..5]);
                say!("guessed", refused, opened);
            }
            // rebind <uasid>: takes over that process's socket name and answers as its owner;
            // what arrives is told by `stolen`.
            "rebind" => {
                rebind(&d, num(&w[1]) as u32, stolen.clone());
                say!("rebound");
            }
            // stolen: the openings answered, and the imports (with their tokens) received.
            "stolen" => {
                let g = stolen.lock().unwrap();
                say!("stolen", g.0, g.1.len(), g.1.first().copied().unwrap_or(0));
            }
            "close" => {
                conns.clear();
                say!("closed");
            }
            _ => panic!("rogue: unknown command {w:?}"),
        }
    }
}

/// What an impostor on another process's socket got: openings answered, import tokens.
type Stolen = Arc<Mutex<(u64, Vec<u32>)>>;

/// Binds `<uasid>.sock` in `d` in place of its owner's socket and, on a thread, answers every
/// opening as the owner would, recording the imports that follow.
fn rebind(d: &Path, uasid: u32, stolen: Stolen) {
    let path = d.join(format!("{uasid}.sock"));
    let _ = std::fs::remove_file(&path);
    let l = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            let stolen = stolen.clone();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(t())).unwrap();
                if read_hdr(&mut s).is_none_or(|h| h.kind != message::K_HELLO) {
                    return;
                }
                stolen.lock().unwrap().0 += 1;
                let ok = Hdr {
                    kind: message::K_ACK,
                    a: message::VERSION,
                    ..Hdr::default()
                };
                if s.write_all(&ok.encode()).is_err() {
                    return;
                }
                while let Some(h) = read_hdr(&mut s) {
                    if h.kind == message::K_IMPORT_SEG && h.token_given != 0 {
                        stolen.lock().unwrap().1.push(h.token);
                    }
                }
            });
        }
    });
}

/// A process of the victim's user that holds a slot and guesses segment tokens for a while
/// (`GUESS` = `<uasid> <token_id> <va> <ms>`, see [`guess`]): says `guessed <refusals>`.
fn guess_for_a_while() {
    let (d, me, _slot) = dir_and_slot();
    let w: Vec<String> = std::env::var("GUESS")
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    say!("guessed", guess(&d, me, &w).0);
}

/// The `guess` command: `[uasid, token_id, va, ms]`. Returns (refusals received, connections
/// opened).
fn guess(d: &Path, me: u32, w: &[String]) -> (u64, u64) {
    let (uasid, token_id, va) = (num(&w[0]) as u32, num(&w[1]), num(&w[2]));
    let end = Instant::now() + Duration::from_millis(num(&w[3]));
    let (mut refused, mut opened) = (0, 0);
    let mut conn: Option<UnixStream> = None;
    let mut tok = TOKEN;
    while Instant::now() < end {
        let s = match conn.as_mut() {
            Some(s) => s,
            None => match hello(d, uasid, me) {
                Some(s) => {
                    opened += 1;
                    conn.insert(s)
                }
                None => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
            },
        };
        tok = tok.wrapping_add(1);
        let h = Hdr {
            kind: message::K_IMPORT_SEG,
            a: token_id,
            b: va,
            c: 4096,
            token: tok,
            token_given: 1,
            ..Hdr::default()
        };
        let left = end.saturating_duration_since(Instant::now());
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match s.write_all(&h.encode()).ok().and_then(|_| read_hdr(s)) {
            Some(a) if a.kind == message::K_ACK && a.status == message::IMPORT_REFUSED => {
                refused += 1
            }
            Some(a) => panic!("a wrong token was not refused: {a:?}"),
            None => conn = None,
        }
    }
    (refused, opened)
}

/// The directory of this role process (`URMA_LOOPBACK_DIR`), and the first free slot of it
/// from 100 on, held (locked) as a process that joined holds its own: (directory, uasid, the
/// locked slot file).
fn dir_and_slot() -> (PathBuf, u32, std::fs::File) {
    let d = PathBuf::from(std::env::var("URMA_LOOPBACK_DIR").unwrap());
    let (me, slot) = (100..4096)
        .find_map(|n| lock_slot(&d, n).map(|f| (n, f)))
        .expect("a free slot");
    (d, me, slot)
}

fn lock_slot(d: &Path, n: u32) -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(d.join(format!("{n}.slot")))
        .ok()?;
    // SAFETY: an all-zero flock is valid; the fields below describe the whole file.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    // SAFETY: F_SETLK with a valid flock on an open descriptor.
    (unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) } == 0).then_some(f)
}

fn read_hdr(s: &mut UnixStream) -> Option<Hdr> {
    let mut b = [0u8; message::HDR_LEN];
    s.read_exact(&mut b).ok()?;
    Some(Hdr::decode(&b))
}

/// Opens a connection to `uasid` and says HELLO as `claimed`: the connection when accepted.
fn hello(d: &Path, uasid: u32, claimed: u32) -> Option<UnixStream> {
    let mut s = UnixStream::connect(d.join(format!("{uasid}.sock"))).ok()?;
    s.set_read_timeout(Some(t())).unwrap();
    let h = Hdr {
        kind: message::K_HELLO,
        src_uasid: claimed,
        a: message::VERSION,
        ..Hdr::default()
    };
    s.write_all(&h.encode()).ok()?;
    let a = read_hdr(&mut s)?;
    (a.kind == message::K_ACK && a.status == 0).then_some(s)
}

/// One message a rogue writes: `kind opcode target_kind target_id token token_given src_uasid
/// imm len sent [token_id token addr len]...` (`sent` payload bytes are written; fewer than
/// `len` leaves the message unfinished and reads no answer).
struct Msg {
    h: Hdr,
    pieces: Vec<Piece>,
    sent: u64,
}

impl Msg {
    fn parse(w: &[String]) -> Msg {
        let n: Vec<u64> = w.iter().map(|x| num(x)).collect();
        let pieces: Vec<Piece> = n[10..]
            .chunks(4)
            .map(|p| Piece {
                token_id: p[0] as u32,
                token: p[1] as u32,
                addr: p[2],
                len: p[3],
            })
            .collect();
        let h = Hdr {
            kind: n[0] as u32,
            opcode: n[1] as u32,
            target_kind: n[2] as u32,
            target_id: n[3] as u32,
            token: n[4] as u32,
            token_given: n[5] as u32,
            src_uasid: n[6] as u32,
            imm: n[7],
            len: n[8],
            ndst: pieces.len() as u32,
            ..Hdr::default()
        };
        Msg {
            h,
            pieces,
            sent: n[9],
        }
    }

    fn send(&self, s: &mut UnixStream) -> Vec<String> {
        let mut out = self.h.encode().to_vec();
        for p in &self.pieces {
            p.encode_into(&mut out);
        }
        out.resize(out.len() + self.sent as usize, 0xa5);
        if s.write_all(&out).is_err() {
            return vec!["broken".into()];
        }
        // A READ asks for `len` bytes and sends none.
        let read = self.h.kind == message::K_DATA && self.h.opcode == READ;
        if self.sent < if read { 0 } else { self.h.len } {
            return vec!["sent".into()];
        }
        let ack = read_hdr(s);
        if let Some(a) = ack.filter(|a| read && a.status == 0) {
            let mut data = vec![0u8; a.len as usize];
            if s.read_exact(&mut data).is_err() {
                return vec!["closed".into()];
            }
        }
        match ack {
            Some(a) => [u64::from(a.kind), u64::from(a.status), a.len, a.a, a.b, a.c]
                .iter()
                .fold(vec!["ack".to_string()], |mut v, x| {
                    v.push(x.to_string());
                    v
                }),
            None => vec!["closed".into()],
        }
    }
}

/// The command line of a rogue's `send`.
#[allow(clippy::too_many_arguments)]
fn send_cmd(
    kind: u32,
    opcode: u32,
    target: (u32, u64),
    token: Option<u32>,
    src_uasid: u64,
    imm: u64,
    (len, sent): (u64, u64),
    pieces: &[(u64, u32, u64, u64)],
) -> String {
    let mut s = format!(
        "send {kind} {opcode} {} {} {} {} {src_uasid} {imm} {len} {sent}",
        target.0,
        target.1,
        token.unwrap_or(0),
        u8::from(token.is_some()),
    );
    for p in pieces {
        s += &format!(" {} {} {} {}", p.0, p.1, p.2, p.3);
    }
    s
}

/// `ack <kind> <status> <len> ...` as numbers.
fn ack_of(p: &mut Proc, cmd: &str) -> Vec<i64> {
    p.ask(cmd, "ack")
}

// ---------------------------------------------------------------- F1: another user's directory

/// Another user who makes the victim's default directory first (world-writable, with a
/// listening socket in it) receives nothing: the victim refuses the directory, says so on
/// standard error although it registered no log callback, and reaches no other process.
#[test]
fn another_users_directory_is_refused_and_never_connected_to() {
    let Some(h) = host() else { return };
    let dir = Host::default_dir(&h.victim);
    let mut sq = Proc::start(
        "squatter",
        Some(&h.attacker),
        &[
            ("SQUAT_DIR", dir.display().to_string()),
            ("SQUAT_N", "5".into()),
        ],
    );
    assert_eq!(sq.hear(), ["ready"]);
    assert_eq!(std::fs::metadata(&dir).unwrap().uid(), h.attacker.uid);
    let (mut v, me) = victim_in(&h, None, &[]);
    assert_eq!(
        me.uasid, 0,
        "the victim did not join the attacker's directory"
    );
    let import = format!("import 5 {} 4096 1 {TOKEN}", me.va);
    assert_eq!(
        v.ask(&import, "import")[0],
        0,
        "no import from the squatter's socket"
    );
    assert_eq!(
        sq.ask("report", "got"),
        [0, 0],
        "the squatter received nothing"
    );
    let err = v.finish();
    assert!(
        err.contains("multi-process mode off") && err.contains(&dir.display().to_string()),
        "the refusal is on standard error: {err}"
    );
    sq.finish();
}

/// Processes of another user (root here) are refused at both ends: an owner closes their
/// connection before reading a request, and a requester does not write to their socket.
#[test]
fn both_ends_refuse_a_process_of_another_user() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    let (mut v, me) = victim_in(&h, Some(&d), &[]);
    assert_ne!(me.uasid, 0, "the victim joined its directory");
    // Root connects to the victim's socket and opens as the victim's own uasid.
    let mut s = UnixStream::connect(d.join(format!("{}.sock", me.uasid))).unwrap();
    s.set_read_timeout(Some(t())).unwrap();
    let hello = Hdr {
        kind: message::K_HELLO,
        src_uasid: me.uasid as u32,
        a: message::VERSION,
        ..Hdr::default()
    };
    // The owner checks the uid at accept and may have closed before the opening is written.
    let _ = s.write_all(&hello.encode());
    assert!(
        read_hdr(&mut s).is_none(),
        "the owner closed without answering"
    );
    // Root listens on a slot's socket name in the victim's directory; the victim imports
    // from that uasid and writes nothing to it.
    let l = UnixListener::bind(d.join("77.sock")).unwrap();
    std::fs::set_permissions(d.join("77.sock"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let _slot = lock_slot(&d, 77).unwrap();
    l.set_nonblocking(true).unwrap();
    let import = format!("import 77 {} 4096 1 {TOKEN}", me.va);
    assert_eq!(v.ask(&import, "import")[0], 0);
    let mut got = 0;
    while let Ok((mut c, _)) = l.accept() {
        c.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut b = Vec::new();
        let _ = c.read_to_end(&mut b);
        got += b.len();
    }
    assert_eq!(got, 0, "the victim wrote nothing to another user's socket");
    let err = v.finish();
    assert!(err.contains("runs as uid 0"), "{err}");
    assert!(err.contains("belongs to uid 0"), "{err}");
}

// ---------------------------------------------------------------- F2: re-pointed directory

/// A directory reached through a link is refused; a directory whose path is re-pointed after
/// the process joined is not followed: the next import still reaches the genuine owner.
#[test]
fn a_re_pointed_directory_is_not_followed() {
    let Some(h) = host() else { return };
    let real = h.private_dir("real", &h.victim);
    let link = h.base.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let mut v = Proc::start("victim", Some(&h.victim), &in_dir(&link));
    assert_eq!(
        Published::of(&mut v).uasid,
        0,
        "a linked directory is refused"
    );
    let err = v.finish();
    assert!(err.contains("multi-process mode off"), "{err}");

    let d = h.private_dir("d", &h.victim);
    let (owner, o) = victim_in(&h, Some(&d), &[]);
    let (mut v, _) = victim_in(&h, Some(&d), &[]);
    // The path now names the attacker's directory, with the attacker on the owner's socket.
    std::fs::rename(&d, h.base.join("moved")).unwrap();
    std::fs::create_dir(&d).unwrap();
    chown(&d, &h.attacker);
    let mut sq = Proc::start(
        "squatter",
        Some(&h.attacker),
        &[
            ("SQUAT_DIR", d.display().to_string()),
            ("SQUAT_N", o.uasid.to_string()),
        ],
    );
    assert_eq!(sq.hear(), ["ready"]);
    assert_eq!(
        v.ask(&o.import(TOKEN), "import")[0],
        1,
        "the genuine owner answered"
    );
    assert_eq!(v.ask("write_last 64", "cr"), [0]);
    assert_eq!(sq.ask("report", "got"), [0, 0]);
    v.finish();
    owner.finish();
    sq.finish();
}

// ---------------------------------------------------------------- F3: tokens on two-sided

/// A rogue process of the victim's user in `d`, and its uasid.
fn rogue_in(h: &Host, d: &Path) -> (Proc, u64) {
    slot_holder_in(h, "rogue", d)
}

/// A process of `role` that announces `ready <its slot>`, run as the victim user in `d`.
fn slot_holder_in(h: &Host, role: &str, d: &Path) -> (Proc, u64) {
    let mut p = as_victim(h, role, Some(d), &[]);
    let w = p.hear();
    assert_eq!(w[0], "ready", "{w:?}");
    let k = num(&w[1]);
    (p, k)
}

const SEND_IMM: u32 = u::URMA_OPC_SEND_IMM;
const WRITE_IMM: u32 = u::URMA_OPC_WRITE_IMM;
const WRITE: u32 = u::URMA_OPC_WRITE;
const READ: u32 = u::URMA_OPC_READ;
const REFUSED: i64 = u::URMA_CR_REM_ACCESS_ABORT_ERR as i64;

/// A process of the same user that imported nothing can deliver nothing: SEND_IMM and
/// WRITE_IMM without the jetty's token are refused; with it, the CR names the connection's
/// uasid, not the one the request claims; a HELLO naming a uasid the process does not hold is
/// refused.
#[test]
fn two_sided_requests_need_the_token_and_name_the_connection() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    let (mut v, me) = victim_in(&h, Some(&d), &[]);
    let (mut r, k) = rogue_in(&h, &d);
    let jetty = (message::TARGET_JETTY, me.jetty);
    assert_eq!(
        r.ask(&format!("connect {} {}", me.uasid, me.uasid), "hello"),
        [-1],
        "a HELLO naming the owner's own uasid"
    );
    assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
    let no_token = send_cmd(message::K_DATA, SEND_IMM, jetty, None, 999, 1, (0, 0), &[]);
    assert_eq!(
        ack_of(&mut r, &no_token)[..2],
        [i64::from(message::K_ACK), REFUSED]
    );
    let wrong = send_cmd(
        message::K_DATA,
        SEND_IMM,
        jetty,
        Some(TOKEN ^ 1),
        999,
        2,
        (0, 0),
        &[],
    );
    // Each refusal closed the connection: a new one for the next request.
    assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
    assert_eq!(ack_of(&mut r, &wrong)[1], REFUSED);
    let write_imm = send_cmd(message::K_DATA, WRITE_IMM, jetty, None, 999, 3, (0, 0), &[]);
    // Each refusal closed the connection: a new one for the next request.
    assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
    assert_eq!(ack_of(&mut r, &write_imm)[1], REFUSED);
    assert_eq!(v.ask("recvs 300", "recvs"), [0], "nothing was delivered");
    let right = send_cmd(
        message::K_DATA,
        SEND_IMM,
        jetty,
        Some(TOKEN),
        999,
        42,
        (16, 16),
        &[],
    );
    // Each refusal closed the connection: a new one for the next request.
    assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
    assert_eq!(
        ack_of(&mut r, &right)[..3],
        [i64::from(message::K_ACK), 0, 16]
    );
    v.say("recvs 2000");
    let got = v.hear();
    assert_eq!(got[..2], ["recvs".to_string(), "1".into()]);
    assert_eq!(
        got[2],
        format!("{k}:0:42"),
        "the sender is the connection's uasid"
    );
    r.finish();
    v.finish();
}

// ---------------------------------------------------------------- F4: a stalled requester

/// A requester that stops in the middle of a payload holds no process-wide lock: a refused
/// request holds nothing, a valid READ on another connection is answered at once, another
/// segment unregisters at once, and the segment it writes into unregisters within the
/// transport's bound (twice the I/O timeout).
#[test]
fn a_stalled_requester_delays_only_its_own_segment() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    let (mut v, me) = victim_in(&h, Some(&d), &[("URMA_LOOPBACK_IO_TIMEOUT_MS", "1500")]);
    let piece = |token: u32, len: u64| (me.token_id, token, me.va, len);
    let none = (message::TARGET_NONE, 0);
    let (mut a, _) = rogue_in(&h, &d);
    let (mut b, _) = rogue_in(&h, &d);
    let (mut c, _) = rogue_in(&h, &d);
    for r in [&mut a, &mut b, &mut c] {
        assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
    }
    // A: refused (wrong token), stalled after 100 of 60000 bytes.
    let stalled_wrong = send_cmd(
        message::K_DATA,
        WRITE,
        none,
        None,
        0,
        0,
        (60_000, 100),
        &[piece(TOKEN ^ 1, 60_000)],
    );
    a.say(&stalled_wrong);
    assert_eq!(a.hear(), ["sent"]);
    // B: a READ of the same segment on another connection.
    let t0 = Instant::now();
    let read = send_cmd(
        message::K_DATA,
        READ,
        none,
        None,
        0,
        0,
        (64, 0),
        &[piece(TOKEN, 64)],
    );
    b.say(&read);
    let w = b.hear();
    assert_eq!(w[..3], ["ack".to_string(), "4".into(), "0".into()], "{w:?}");
    assert!(
        t0.elapsed() < scaled(500),
        "READ answered in {:?}",
        t0.elapsed()
    );
    let took = v.ask("unreg_other", "took_ms")[0];
    assert!(
        took < scaled(200).as_millis() as i64,
        "another segment: {took} ms"
    );
    // C: a valid WRITE into the segment, stalled after 100 bytes: unregistering it waits for
    // that transfer, at most twice the I/O timeout.
    let stalled = send_cmd(
        message::K_DATA,
        WRITE,
        none,
        None,
        0,
        0,
        (60_000, 100),
        &[piece(TOKEN, 60_000)],
    );
    c.say(&stalled);
    assert_eq!(c.hear(), ["sent"]);
    std::thread::sleep(Duration::from_millis(100));
    let took = v.ask("unreg_main", "took_ms")[0];
    assert!(
        took < scaled(3000 + 500).as_millis() as i64,
        "the written segment: {took} ms"
    );
    println!("unregister behind a stalled transfer: {took} ms (I/O timeout 1500 ms)");
    for r in [a, b, c] {
        r.finish();
    }
    v.finish();
}

// ---------------------------------------------------------------- F5: connect

/// An owner whose listen backlog is full delays only imports from itself, for at most the
/// connect timeout; an import from another owner at the same time completes at once.
#[test]
fn an_owner_that_does_not_accept_delays_only_imports_from_itself() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    let mut deaf_p = Proc::start("deaf", Some(&h.victim), &in_dir(&d));
    let w = deaf_p.hear();
    assert_eq!(w[0], "ready");
    let deaf_uasid = num(&w[1]);
    let (healthy, o) = victim_in(&h, Some(&d), &[]);
    let (mut v, _) = victim_in(&h, Some(&d), &[("URMA_LOOPBACK_CONNECT_TIMEOUT_MS", "700")]);
    let cmd = format!(
        "import_pair {deaf_uasid} {} 4096 1 {TOKEN} {} {} {} {} {TOKEN}",
        o.va, o.uasid, o.va, o.len, o.token_id
    );
    let r = v.ask(&cmd, "pair");
    println!(
        "deaf owner: ok {} in {} ms; healthy owner: ok {} in {} ms",
        r[0], r[1], r[2], r[3]
    );
    assert_eq!(
        r[0], 0,
        "nothing imported from an owner that does not accept"
    );
    assert!(
        r[1] < scaled(700 + 600).as_millis() as i64,
        "bounded by the connect timeout"
    );
    assert_eq!(r[2], 1);
    assert!(
        r[3] < scaled(400).as_millis() as i64,
        "not behind the other import"
    );
    v.finish();
    healthy.finish();
    deaf_p.finish();
}

/// A process of the victim's user that holds a slot and listens on its socket with a full
/// backlog (it never accepts).
fn deaf() {
    let (d, me, _slot) = dir_and_slot();
    let path = d.join(format!("{me}.sock"));
    let l = UnixListener::bind(&path).unwrap();
    // SAFETY: listen on a bound socket this listener owns; a second listen sets the backlog.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
    // Fill the backlog: non-blocking connects until one is refused.
    let mut a: libc::sockaddr_un = {
        // SAFETY: an all-zero sockaddr_un is a valid value.
        unsafe { std::mem::zeroed() }
    };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, &b) in a
        .sun_path
        .iter_mut()
        .zip(path.as_os_str().as_encoded_bytes())
    {
        *dst = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    let mut held = Vec::new();
    for _ in 0..8 {
        // SAFETY: a fresh socket and a sockaddr_un that lives across the call; the descriptors
        // kept in `held` live until the process ends.
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
            if libc::connect(fd, (&a as *const libc::sockaddr_un).cast(), len) == 0 {
                held.push(fd);
            }
        }
    }
    assert!(!held.is_empty(), "the backlog took a connection");
    say!("ready", me);
    while hear_cmd().is_some() {}
}

// ---------------------------------------------------------------- F6: connection limits

/// An owner serves at most `URMA_LOOPBACK_MAX_CONNS` connections (a thread each) and closes
/// idle ones; a requester whose connection was closed for idleness reaches the owner again
/// transparently, its requests in order.
#[test]
fn connections_are_capped_and_idle_ones_closed() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    let limits = [
        ("URMA_LOOPBACK_MAX_CONNS", "8"),
        ("URMA_LOOPBACK_IDLE_TIMEOUT_MS", "300"),
        ("URMA_LOOPBACK_IO_TIMEOUT_MS", "500"),
    ];
    let (mut v, me) = victim_in(&h, Some(&d), &limits);
    let base = v.ask("threads", "threads")[0];
    // Three processes (each may hold a few connections at once), 200 connections each.
    let mut rs: Vec<Proc> = (0..3).map(|_| rogue_in(&h, &d).0).collect();
    for r in &mut rs {
        assert_eq!(
            r.ask(&format!("rawopen {} 200", me.uasid), "opened")[0],
            200
        );
    }
    std::thread::sleep(scaled(150));
    let busy = v.ask("threads", "threads")[0];
    println!("owner threads: {base} idle, {busy} with 600 connections open (cap 8)");
    assert!(busy <= base + 8, "{busy} threads (base {base})");
    // Silent connections are dropped after the HELLO deadline, then the rest are admitted
    // and dropped in turn; with everything closed the owner is back to its base.
    for r in &mut rs {
        assert_eq!(r.ask("close", "closed"), Vec::<i64>::new());
    }
    let end = Instant::now() + t();
    while v.ask("threads", "threads")[0] > base && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(v.ask("threads", "threads")[0], base);
    // A genuine requester across an idle close.
    let (mut q, _) = victim_in(&h, Some(&d), &[("URMA_LOOPBACK_IO_TIMEOUT_MS", "500")]);
    assert_eq!(q.ask(&me.import(TOKEN), "import")[0], 1);
    assert_eq!(q.ask("write_last 64", "cr"), [0]);
    std::thread::sleep(scaled(1500));
    assert_eq!(
        v.ask("threads", "threads")[0],
        base,
        "the idle connection was closed"
    );
    for _ in 0..3 {
        assert_eq!(
            q.ask("write_last 64", "cr"),
            [0],
            "after the owner closed the idle one"
        );
    }
    q.finish();
    for r in rs {
        r.finish();
    }
    let err = v.finish();
    assert!(
        err.contains("URMA_LOOPBACK_MAX_CONNS"),
        "the cap is reported: {err}"
    );
}

// ---------------------------------------------------------------- F7: answers

/// The owner acknowledges exactly what it wrote (a payload longer than its pieces is refused,
/// nothing written), an import refusal does not tell an unknown segment from a wrong token,
/// and token failures are reported once per object.
#[test]
fn the_owner_acknowledges_what_it_wrote_and_refusals_tell_nothing() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    let (mut v, me) = victim_in(&h, Some(&d), &[]);
    let (mut r, _) = rogue_in(&h, &d);
    assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
    let none = (message::TARGET_NONE, 0);
    let long = send_cmd(
        message::K_DATA,
        WRITE,
        none,
        None,
        0,
        0,
        (64, 64),
        &[(me.token_id, TOKEN, me.va, 16)],
    );
    assert_eq!(ack_of(&mut r, &long)[1..3], [REFUSED, 0]);
    assert_eq!(v.ask("intact", "intact"), [1], "not one byte written");
    // The answers to an unknown segment and to a wrong token are the same bytes (each refusal
    // closes its connection: a new one for each request).
    assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
    let unknown = r.ask(
        &format!("imp {} {} 4096 {TOKEN}", me.token_id + 50, me.va),
        "ack",
    );
    assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
    let wrong = r.ask(
        &format!("imp {} {} 4096 {}", me.token_id, me.va, TOKEN ^ 1),
        "ack",
    );
    assert_eq!(unknown[1], i64::from(message::IMPORT_REFUSED));
    assert_eq!(unknown, wrong);
    assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
    let right = r.ask(
        &format!("imp {} {} 4096 {TOKEN}", me.token_id, me.va),
        "ack",
    );
    assert_eq!(right[1], i64::from(message::IMPORT_OK));
    for i in 0..4 {
        assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
        let w = r.ask(
            &format!("imp {} {} 4096 {}", me.token_id, me.va, TOKEN ^ (i + 7)),
            "ack",
        );
        assert_eq!(w[1], i64::from(message::IMPORT_REFUSED));
    }
    r.finish();
    let err = v.finish();
    let lines = err.lines().filter(|l| l.contains("refused")).count();
    println!("{lines} refusal lines for 7 refused requests against 2 segments");
    assert!(
        (1..=10).contains(&lines),
        "rate-limited: {lines} lines\n{err}"
    );
    let objects = err.lines().filter(|l| l.contains("wrong token")).count();
    assert_eq!(objects, 2, "one line per segment refused\n{err}");
}

// ---------------------------------------------------------------- guessing tokens online

/// Wrong guesses one requesting process gets answered in [`GUESS_MS`] against one owner, across
/// reconnections: the owner's back-off (docs/loopback.md, "Security model") allows 8 (after
/// 0, 20, 40, 80, 160, 320, 640 and 1000 ms of waiting), so 10 leaves room for timing.
const GUESS_BUDGET: i64 = 10;
const GUESS_MS: u64 = 3000;

/// Tokens cannot be guessed online: a refused import closes the connection, and the owner
/// checks a requester's next token only after a back-off that grows with its refusals, so one
/// process guessing over fresh connections gets a few answers per second; the refusals against
/// one segment are logged once and counted; the right token still works afterwards.
#[test]
fn wrong_tokens_close_the_connection_and_are_throttled() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    let (mut v, me) = victim_in(&h, Some(&d), &[]);
    let (mut r, _) = rogue_in(&h, &d);
    let g = r.ask(
        &format!("guess {} {} {} {GUESS_MS}", me.uasid, me.token_id, me.va),
        "guessed",
    );
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "{} wrong tokens answered in {GUESS_MS} ms over {} connections ({:.1}/s, {build} build)",
        g[0],
        g[1],
        g[0] as f64 * 1000.0 / GUESS_MS as f64
    );
    assert!(g[0] >= 3, "the guesses were answered: {g:?}");
    assert!(
        g[0] <= GUESS_BUDGET,
        "at most {GUESS_BUDGET} wrong guesses in {GUESS_MS} ms: {g:?}"
    );
    assert!(g[1] >= g[0], "every refusal closed its connection: {g:?}");
    assert_eq!(r.ask(&format!("connect {} me", me.uasid), "hello"), [0]);
    let right = r.ask(
        &format!("imp {} {} 4096 {TOKEN}", me.token_id, me.va),
        "ack",
    );
    assert_eq!(right[1], i64::from(message::IMPORT_OK), "the right token");
    // The owner may have refused one more as the guessing ended, unanswered in time.
    let c = v.ask("counters", "counters");
    assert!(
        (g[0]..=g[0] + 1).contains(&c[0]),
        "every refusal is counted: {c:?}, {g:?}"
    );
    assert_eq!(c[1], 1, "one object refused");
    r.finish();
    let err = v.finish();
    let lines = err.lines().filter(|l| l.contains("wrong token")).count();
    assert_eq!(lines, 1, "logged once for the segment:\n{err}");
}

/// How long each of the processes of [`fresh_processes_guessing_are_paced_by_the_owner`]
/// guesses: long enough for several answers of its own back-off (0, 20, 40, 80, 160 ms).
const GUESSER_MS: u64 = 500;

/// Processes started afresh to guess get no more answers than the owner's pace: once it has
/// refused 10 checks within a second it answers every check in turn, 100 ms apart, whoever
/// asks (without that, four processes at a time, each with its own back-off starting at 0,
/// would get about 40 answers per second).
#[test]
fn fresh_processes_guessing_are_paced_by_the_owner() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    let (mut v, me) = victim_in(&h, Some(&d), &[]);
    let (refused, started) = (AtomicU64::new(0), AtomicU64::new(0));
    let t0 = Instant::now();
    let end = t0 + Duration::from_millis(GUESS_MS);
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| {
                while Instant::now() < end {
                    let ms = end.saturating_duration_since(Instant::now()).as_millis() as u64;
                    let guess = format!(
                        "{} {} {} {}",
                        me.uasid,
                        me.token_id,
                        me.va,
                        ms.min(GUESSER_MS)
                    );
                    let mut p = as_victim(&h, "guesser", Some(&d), &[("GUESS", &guess)]);
                    started.fetch_add(1, Ordering::Relaxed);
                    let w = p.hear();
                    assert_eq!(w[0], "guessed");
                    refused.fetch_add(num(&w[1]), Ordering::Relaxed);
                    p.finish();
                }
            });
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    let (refused, started) = (refused.into_inner(), started.into_inner());
    println!(
        "{refused} wrong tokens answered in {secs:.1} s to {started} processes ({:.1}/s)",
        refused as f64 / secs
    );
    // 10 in the second that starts the strain, then 10 per second, and a little for timing.
    let budget = 10 + (10.0 * secs) as u64 + 5;
    assert!(refused >= 1, "the guesses were answered");
    assert!(
        refused <= budget,
        "at most {budget} in {secs:.1} s: {refused} to {started} processes"
    );
    let c = v.ask("counters", "counters");
    assert!(c[0] as u64 >= refused, "counted: {c:?}");
    v.finish();
}

// ---------------------------------------------------------------- acknowledgements

/// A requester does not believe an owner's acknowledgement that claims more bytes than the WR
/// moved, a CR status that does not exist, or a READ answered with another length than asked:
/// the WR completes with `URMA_CR_REM_OPERATION_ERR`, nothing claimed, and the requester closes
/// the connection.
#[test]
fn a_requester_refuses_an_acknowledgement_that_does_not_match_its_wr() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    for (mode, op, n) in [
        ("len", "write", 5),
        ("status", "write", 5),
        ("short", "read", 64),
        ("len", "read", 64),
    ] {
        let mut l = as_victim(&h, "liar", Some(&d), &[("LIAR_ACK", mode)]);
        let w = l.hear();
        assert_eq!(w[0], "ready", "{w:?}");
        let (mut v, _) = victim_in(&h, Some(&d), &[]);
        let import = format!("import {} 4096 4096 1 {TOKEN}", w[1]);
        assert_eq!(v.ask(&import, "import")[0], 1);
        let cr = v.ask(&format!("rw_last {op} {n}"), "cr");
        println!("{op} of {n} bytes, acknowledged with a lie ({mode}): CR {cr:?}");
        assert_eq!(
            cr,
            [i64::from(u::URMA_CR_REM_OPERATION_ERR), 0],
            "{op} of {n}, {mode}"
        );
        assert_eq!(
            l.ask("report", "liar"),
            [1, 1],
            "the requester closed the connection ({op} of {n}, {mode})"
        );
        v.finish();
        l.finish();
    }
}

// ---------------------------------------------------------------- pid namespaces

/// Processes in different pid namespaces, which see each other's pid as 0, do not meet: an
/// owner in a namespace of its own admits nobody from outside (not under another process's
/// uasid, not under its own), and a requester in a namespace of its own sends nothing to an
/// impostor that re-bound its owner's socket; both say why.
#[test]
fn processes_in_other_pid_namespaces_are_refused() {
    let Some(h) = host() else { return };
    assert!(
        run_quiet("unshare", &["--pid", "--fork", "true"]),
        "unshare --pid --fork (util-linux, packaging/deps.sh) runs a program in a pid namespace"
    );
    let d = h.private_dir("d", &h.victim);
    let mut inner = Proc::start_in("victim", Some(&h.victim), &in_dir(&d), true);
    let me = Published::of(&mut inner);
    assert_ne!(me.uasid, 0, "the process in its own pid namespace joined");
    let (other, o) = victim_in(&h, Some(&d), &[]);
    let (mut r, _) = rogue_in(&h, &d);
    assert_eq!(
        r.ask(&format!("connect {} {}", me.uasid, o.uasid), "hello"),
        [-1],
        "a process outside, naming another process's uasid"
    );
    assert_eq!(
        r.ask(&format!("connect {} me", me.uasid), "hello"),
        [-1],
        "a process outside, naming its own uasid"
    );
    // An impostor on the owner's socket name, and a requester in its own namespace.
    let (owner, x) = victim_in(&h, Some(&d), &[]);
    assert!(r.ask(&format!("rebind {}", x.uasid), "rebound").is_empty());
    let mut q = Proc::start_in("victim", Some(&h.victim), &in_dir(&d), true);
    let _ = Published::of(&mut q);
    assert_eq!(q.ask(&x.import(TOKEN), "import")[0], 0);
    assert_eq!(
        r.ask("stolen", "stolen"),
        [0, 0, 0],
        "the impostor got no opening and no token"
    );
    r.finish();
    owner.finish();
    other.finish();
    for p in [inner, q] {
        let err = p.finish();
        assert!(err.contains("pid namespace"), "the refusal says why: {err}");
    }
}

// ---------------------------------------------------------------- one process, many connections

/// One process cannot take an owner's connections: a connection that has not said HELLO is
/// closed after a short deadline (well below the I/O timeout), and each process gets only a few
/// at a time, so a genuine import succeeds while another process holds all it can open.
#[test]
fn one_process_cannot_take_every_connection() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    let (mut v, me) = victim_in(&h, Some(&d), &[("URMA_LOOPBACK_MAX_CONNS", "16")]);
    let (mut r, _) = rogue_in(&h, &d);
    assert_eq!(r.ask(&format!("rawopen {} 40", me.uasid), "opened")[0], 40);
    let admitted = r.ask(&format!("connect_n {} 40", me.uasid), "admitted")[0];
    let (mut q, _) = victim_in(&h, Some(&d), &[]);
    let ok = q.ask(&me.import(TOKEN), "import")[0];
    println!("one process: 40 silent connections, then {admitted} admitted of 40 openings");
    assert_eq!(
        ok, 1,
        "a genuine import while one process holds what it can"
    );
    assert!(admitted <= 4, "{admitted} admitted for one process");
    let (mut s, _) = rogue_in(&h, &d);
    assert_eq!(s.ask(&format!("rawopen {} 1", me.uasid), "opened")[0], 1);
    let ms = s.ask("eof_ms", "eof_ms")[0];
    println!("a silent connection closed after {ms} ms (I/O timeout 5000 ms)");
    assert!(ms < scaled(1500).as_millis() as i64, "{ms} ms");
    for p in [q, r, s] {
        p.finish();
    }
    v.ask("threads", "threads");
    v.finish();
}

// ---------------------------------------------------------------- fuzz

/// A malicious peer of the same user writes malformed and mutated messages (bounded in count and
/// time): the owner neither crashes nor writes its segment, and still serves a genuine peer.
#[test]
fn a_malicious_peer_fuzzing_the_format_finds_nothing() {
    let Some(h) = host() else { return };
    let d = h.private_dir("d", &h.victim);
    let (mut v, me) = victim_in(&h, Some(&d), &[("URMA_LOOPBACK_IO_TIMEOUT_MS", "200")]);
    let (mut r, _) = rogue_in(&h, &d);
    let seed = std::env::var("SEC_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(1, |d| d.as_nanos() as u64) ^ u64::from(std::process::id())
        });
    println!("fuzz seed {seed} (SEC_FUZZ_SEED)");
    let n = r.ask(
        &format!("fuzz {} {seed} 2000 {} {}", me.uasid, me.token_id, me.va),
        "fuzzed",
    )[0];
    println!("{n} messages");
    assert!(n >= 100, "the fuzz ran: {n}");
    assert_eq!(v.ask("intact", "intact"), [1]);
    let (mut q, _) = victim_in(&h, Some(&d), &[]);
    assert_eq!(q.ask(&me.import(TOKEN), "import")[0], 1, "still serving");
    assert_eq!(q.ask("write_last 64", "cr"), [0]);
    q.finish();
    r.finish();
    v.finish();
}

/// xorshift64*: the fuzz's reproducible random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Mostly small values, sometimes anything.
    fn field(&mut self, small: u64) -> u64 {
        match self.below(8) {
            0 => self.next(),
            1 => u64::MAX - self.below(4),
            _ => self.below(small),
        }
    }
}

/// What the fuzz aims at: the owner (its uasid, a segment's token id and VA) and the rogue's
/// own slot and directory.
struct Target<'a> {
    dir: &'a Path,
    me: u32,
    uasid: u32,
    token_id: u32,
    va: u64,
}

/// One random message: mostly well-formed headers with hostile values, sometimes random bytes;
/// the payload is what the header says (at most 64 KiB), or cut short.
fn random_message(g: &mut Rng, t: &Target<'_>) -> (Vec<u8>, bool) {
    if g.below(16) == 0 {
        let n = g.below(200) as usize;
        return ((0..n).map(|_| g.next() as u8).collect(), false);
    }
    let kinds = [
        message::K_DATA,
        message::K_DATA,
        message::K_DATA,
        message::K_IMPORT_SEG,
        message::K_IMPORT_JETTY,
        message::K_ACK,
        message::K_HELLO,
        message::K_BYE,
        g.next() as u32,
    ];
    let ndst = g.field(4).min(300) as u32;
    let mut h = Hdr {
        kind: kinds[g.below(kinds.len() as u64) as usize],
        opcode: g.field(12) as u32,
        flags: g.next() as u32,
        src_uasid: g.field(8) as u32,
        src_id: g.field(8) as u32,
        target_kind: g.field(4) as u32,
        target_id: g.field(8) as u32,
        token: g.next() as u32,
        token_given: g.below(2) as u32,
        ndst,
        imm: g.next(),
        len: g.field(1 << 16),
        a: g.field(8),
        b: t.va.wrapping_add(g.field(1 << 17)),
        c: g.field(1 << 17),
        ..Hdr::default()
    };
    if h.kind == message::K_IMPORT_SEG {
        h.a = u64::from(t.token_id);
    }
    let mut out = h.encode().to_vec();
    for _ in 0..ndst {
        Piece {
            token_id: if g.below(2) == 0 {
                t.token_id
            } else {
                g.next() as u32
            },
            token: g.next() as u32,
            addr: t
                .va
                .wrapping_add(g.field(1 << 17))
                .wrapping_sub(g.below(64)),
            len: g.field(1 << 17),
        }
        .encode_into(&mut out);
    }
    let whole = h.len <= 1 << 16 && g.below(8) != 0;
    let body = if whole {
        h.len
    } else {
        g.below(h.len.min(4096))
    };
    out.extend((0..body).map(|_| g.next() as u8));
    (out, whole)
}

/// Writes `count` random messages (for at most ten seconds) to the owner, over connections it
/// reopens whenever the owner closes one. Returns how many it wrote.
fn fuzz(t: &Target<'_>, seed: u64, count: u64) -> u64 {
    let mut g = Rng(seed | 1);
    let end = Instant::now() + Duration::from_secs(10);
    let mut conn: Option<UnixStream> = None;
    let mut sent = 0;
    while sent < count && Instant::now() < end {
        let s = match conn.as_mut() {
            Some(s) => s,
            None => {
                let Some(s) = hello(t.dir, t.uasid, t.me) else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                conn.insert(s)
            }
        };
        let (m, whole) = random_message(&mut g, t);
        sent += 1;
        if s.write_all(&m).is_err() || !whole {
            conn = None;
            continue;
        }
        // Drain whatever the owner answers; a closed connection is reopened.
        let mut buf = [0u8; 65536];
        match s.read(&mut buf) {
            Ok(0) => conn = None,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => conn = None,
        }
    }
    sent
}
