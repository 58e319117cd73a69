//! `mlcachedirect-inject`: arms, clears and verifies the inject points of every inject-enabled
//! libos_transport on this host, through the host's registry (docs/inject.md, "The tool"). Its
//! commands, arguments, output lines and exit codes are the original `mlcd_inject_cli`'s, so the
//! scripts of a fault suite run it in that tool's place; both only ever meet a library in the
//! registry.

use os_transport_inject as inj;
use std::process::ExitCode;

/// The seven points of the library, with the step each stands for.
const POINTS: [(&str, &str); 7] = [
    (
        "os_transport.send.begin",
        "send: entry, before the chunk split",
    ),
    (
        "os_transport.recv.begin",
        "recv: entry, before the receive is set up",
    ),
    (
        "os_transport.task_group.alloc",
        "send/recv: registration of the request",
    ),
    (
        "os_transport.send.first_chunk",
        "send: post of chunk 0's WRITE",
    ),
    (
        "os_transport.urma.write",
        "send: every WRITE and SEND_IMM post",
    ),
    ("os_transport.urma.recv", "recv: every receive WR post"),
    (
        "os_transport.notify_callback",
        "recv: the per-chunk notify callback",
    ),
];

fn usage() {
    println!(
        "Usage: mlcachedirect-inject <command> [arguments]\n\
         \n\
         Commands:\n  \
           list                          show the inject points\n  \
           set <point> sleep <ms>        delay the point by <ms> milliseconds\n  \
           set <point> error <code>      make the point fail with <code>\n  \
           clear <point>                 disable one point\n  \
           clearall                      disable every point\n  \
           verify <point> <seconds>      exit 0 if the point fired in the last <seconds>\n  \
           help                          this text\n\
         \n\
         Points are armed for every inject-enabled libos_transport on this host \
         (shared memory /os_transport_inject)."
    );
}

/// A decimal int as the original reads it (`strtol`, base 10): leading white space and a sign
/// allowed, every character consumed, in the range of an int.
fn parse_int(s: &str) -> Option<i32> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.strip_prefix('+').unwrap_or(t).parse::<i32>().ok()
}

fn debug_mode() -> bool {
    matches!(
        std::env::var("MLCD_INJECT_DEBUG").as_deref(),
        Ok("1") | Ok("true")
    )
}

fn set(args: &[String], debug: bool) -> ExitCode {
    if args.len() < 5 {
        eprintln!("Error: 'set' requires <point> <sleep|error> <value>");
        usage();
        return ExitCode::FAILURE;
    }
    let (point, kind, value) = (&args[2], &args[3], &args[4]);
    let Some(v) = parse_int(value) else {
        eprintln!("Error: Invalid numeric value '{value}'");
        return ExitCode::FAILURE;
    };
    if !point.starts_with("os_transport.") {
        eprintln!("Warning: point '{point}' does not start with 'os_transport.'");
    }
    let (r, what) = match kind.as_str() {
        "sleep" => {
            if v < 0 {
                eprintln!("Error: sleep must not be negative: {v}");
                return ExitCode::FAILURE;
            }
            println!("[mlcd_inject] Set {point} = sleep({v} ms)");
            (inj::set_sleep(point.as_bytes(), v as u32), "sleep")
        }
        "error" => {
            println!("[mlcd_inject] Set {point} = return_error({v})");
            (inj::set_return_error(point.as_bytes(), v), "error")
        }
        _ => {
            eprintln!("Error: Unknown type '{kind}', use 'sleep' or 'error'");
            return ExitCode::FAILURE;
        }
    };
    if r != 0 {
        eprintln!("Error: Failed to set {what} injection, ret={r}");
        return ExitCode::FAILURE;
    }
    if debug {
        println!("[mlcd_inject] {what} injection set successfully");
        println!("[mlcd_inject] Hint: 'verify {point} <seconds>' tells whether it fired");
    }
    ExitCode::SUCCESS
}

fn verify(args: &[String]) -> ExitCode {
    if args.len() < 4 {
        eprintln!("Error: 'verify' requires <point> <seconds>");
        return ExitCode::FAILURE;
    }
    let (point, secs) = (&args[2], &args[3]);
    let Some(s) = parse_int(secs).filter(|&s| s >= 0) else {
        eprintln!("Error: Invalid seconds value '{secs}'");
        return ExitCode::FAILURE;
    };
    let window = u64::from(s.unsigned_abs()) * 1_000_000_000;
    if inj::triggered_within(point.as_bytes(), window) == Some(true) {
        println!("TRIGGERED");
        ExitCode::SUCCESS
    } else {
        println!("NOT_TRIGGERED");
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let debug = debug_mode();
    if debug {
        eprintln!("[mlcd_inject] Debug mode enabled");
        eprintln!("[mlcd_inject] argc={}", args.len());
        for (i, a) in args.iter().enumerate() {
            eprintln!("[mlcd_inject] argv[{i}]={a}");
        }
    }
    let Some(cmd) = args.get(1) else {
        usage();
        return ExitCode::FAILURE;
    };
    match cmd.as_str() {
        "help" | "-h" | "--help" => {
            usage();
            ExitCode::SUCCESS
        }
        "list" => {
            println!("Available injection points:");
            for (name, what) in POINTS {
                println!("  {name:<32} {what}");
            }
            ExitCode::SUCCESS
        }
        "clearall" => {
            println!("[mlcd_inject] Clearing all injection points");
            inj::clear_all();
            println!("[mlcd_inject] All injection points cleared successfully");
            ExitCode::SUCCESS
        }
        "clear" => {
            let Some(point) = args.get(2) else {
                eprintln!("Error: 'clear' requires point name");
                return ExitCode::FAILURE;
            };
            println!("[mlcd_inject] Clearing injection point: {point}");
            inj::clear(point.as_bytes());
            println!("[mlcd_inject] Injection point '{point}' cleared successfully");
            ExitCode::SUCCESS
        }
        "set" => set(&args, debug),
        "verify" => verify(&args),
        other => {
            eprintln!("Error: Unknown command '{other}'");
            usage();
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_int;

    #[test]
    fn numbers_parse_as_strtol_with_full_consumption() {
        assert_eq!(parse_int("3000"), Some(3000));
        assert_eq!(parse_int("  -5"), Some(-5));
        assert_eq!(parse_int("+7"), Some(7));
        assert_eq!(parse_int("4096"), Some(4096));
        assert_eq!(parse_int("0x1000"), None);
        assert_eq!(parse_int("12ab"), None);
        assert_eq!(parse_int("5 "), None);
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_int("-"), None);
        assert_eq!(parse_int("2147483648"), None);
        assert_eq!(parse_int("-2147483648"), Some(i32::MIN));
    }
}
