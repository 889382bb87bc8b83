//! Ubuntu's AppArmor restriction on unprivileged user namespaces, and the
//! profile that lifts it for this binary alone.
//!
//! Where `kernel.apparmor_restrict_unprivileged_userns=1` (Ubuntu 23.10 and
//! later, GitHub's ubuntu-24.04 runners), an unprivileged program may still
//! create a user namespace but holds no capability inside it unless an
//! AppArmor profile for the program allows `userns`. The sandbox needs those
//! capabilities to set up its mount, PID and network namespaces, so
//! `sandbox status` says when the restriction is on, and
//! `sandbox apparmor-profile` prints a profile that allows user namespaces
//! to this binary's path and confines nothing else.
//!
//! Reading the three files is kept apart from what they mean: [`interpret`]
//! and [`profile`] are pure and unit tested; [`restriction`] only reads.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::sandbox::AppArmorStatus;

/// The sysctl that turns the restriction on.
pub const SYSCTL: &str = "kernel.apparmor_restrict_unprivileged_userns";
const SYSCTL_FILE: &str = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";
/// `Y` when AppArmor is enabled in the running kernel.
const ENABLED_FILE: &str = "/sys/module/apparmor/parameters/enabled";
/// AppArmor's own view of this process's label (kernels 5.8 and later).
const LABEL_FILE: &str = "/proc/self/attr/apparmor/current";

/// The profile's name, and the name of its file under `/etc/apparmor.d/`
/// and of the optional local additions under `/etc/apparmor.d/local/`.
pub const PROFILE_NAME: &str = "reachweaver-mcp";
/// Where the README and `sandbox status` tell owners to install it.
pub const INSTALL_PATH: &str = "/etc/apparmor.d/reachweaver-mcp";

/// The install steps `sandbox status` shows when the restriction is on.
pub fn install_hint() -> String {
    format!(
        "reachweaver-mcp sandbox apparmor-profile | sudo tee {INSTALL_PATH} \
         && sudo apparmor_parser -r {INSTALL_PATH}"
    )
}

/// One file as read: missing, its text, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    Absent,
    Text(String),
    Failed(String),
}

impl Read {
    fn file(path: &str) -> Read {
        match std::fs::read_to_string(path) {
            Ok(t) => Read::Text(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Read::Absent,
            Err(e) => Read::Failed(e.to_string()),
        }
    }
}

/// What the sysctl says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sysctl {
    /// No such sysctl: a kernel without Ubuntu's AppArmor change, or without AppArmor.
    Absent,
    /// `0`: user namespaces are not restricted by AppArmor.
    Off,
    /// `1`: restricted unless a profile allows `userns`.
    On,
    /// Anything else, kept verbatim (or the read error) for the report.
    Unrecognised(String),
}

/// The machine's restriction as far as this process can see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restriction {
    pub sysctl: Sysctl,
    /// AppArmor is enabled in the running kernel (its module parameter reads `Y`).
    pub enabled: bool,
    /// The AppArmor profile this process runs under, when it runs under one.
    pub profile: Option<String>,
}

/// Read the three files and interpret them.
pub fn restriction() -> Restriction {
    interpret(
        &Read::file(SYSCTL_FILE),
        &Read::file(ENABLED_FILE),
        &Read::file(LABEL_FILE),
    )
}

/// What the files mean. The kernel writes each value followed by one
/// newline; that newline is the only thing tolerated around it.
pub fn interpret(sysctl: &Read, enabled: &Read, label: &Read) -> Restriction {
    let sysctl = match sysctl {
        Read::Absent => Sysctl::Absent,
        Read::Failed(e) => Sysctl::Unrecognised(format!("unreadable: {e}")),
        Read::Text(t) => match value(t) {
            "0" => Sysctl::Off,
            "1" => Sysctl::On,
            _ => Sysctl::Unrecognised(t.clone()),
        },
    };
    let enabled = matches!(enabled, Read::Text(t) if value(t) == "Y");
    let profile = match label {
        Read::Text(t) => profile_of_label(value(t)),
        Read::Absent | Read::Failed(_) => None,
    };
    Restriction {
        sysctl,
        enabled,
        profile,
    }
}

fn value(text: &str) -> &str {
    text.strip_suffix('\n').unwrap_or(text)
}

/// The profile named by a label such as `reachweaver-mcp (unconfined)` or
/// `/usr/bin/foo (enforce)`; `None` for `unconfined`, which is no profile.
fn profile_of_label(label: &str) -> Option<String> {
    let name = match label.rsplit_once(" (") {
        Some((name, mode)) if mode.ends_with(')') => name,
        _ => label,
    };
    (!name.is_empty() && name != "unconfined").then(|| name.to_string())
}

impl Restriction {
    /// User namespaces come without capabilities for unprivileged programs
    /// that no profile allows `userns`.
    pub fn restricted(&self) -> bool {
        self.sysctl == Sysctl::On && self.enabled
    }

    /// The `sandbox status` report: the JSON fields and the one line.
    pub fn report(&self) -> AppArmorStatus {
        let userns_restriction = match self.sysctl {
            Sysctl::Absent => "not_present",
            Sysctl::Off => "off",
            Sysctl::On => "on",
            Sysctl::Unrecognised(_) => "unrecognised",
        };
        let detail = match (&self.sysctl, self.enabled, self.profile.as_deref()) {
            (Sysctl::On, true, Some(PROFILE_NAME)) => format!(
                "unprivileged user namespaces restricted ({SYSCTL}=1); \
                 this binary runs under the AppArmor profile {PROFILE_NAME}"
            ),
            (Sysctl::On, true, _) => format!(
                "unprivileged user namespaces restricted ({SYSCTL}=1); install a profile: {}",
                install_hint()
            ),
            (Sysctl::On, false, _) => {
                format!("{SYSCTL}=1, but AppArmor is not enabled, so nothing is restricted")
            }
            (Sysctl::Off, ..) => {
                format!("unprivileged user namespaces not restricted ({SYSCTL}=0)")
            }
            (Sysctl::Absent, ..) => {
                format!("no user namespace restriction on this kernel ({SYSCTL} not present)")
            }
            (Sysctl::Unrecognised(v), ..) => format!(
                "{SYSCTL} reads {v:?}, which this version does not know; if user namespaces \
                 are missing above, `reachweaver-mcp sandbox apparmor-profile` prints a profile \
                 that allows them"
            ),
        };
        AppArmorStatus {
            enabled: self.enabled,
            userns_restriction,
            restricted: self.restricted(),
            profile: self.profile.clone(),
            detail,
        }
    }
}

/// Why no profile can be written for a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileError {
    /// The path is relative, or has `.`, `..`, `//` or a trailing `/`.
    NotCanonical(String),
    /// The path is not valid UTF-8 (profiles are text).
    NotUtf8(String),
    /// A character AppArmor would read as a pattern, so the profile would
    /// also attach to other files.
    Glob { path: String, ch: char },
    /// A control character (a newline would end the rule).
    Control { path: String, ch: char },
}

impl std::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProfileError::NotCanonical(p) => write!(
                f,
                "{p}: an AppArmor profile needs the binary's absolute canonical path"
            ),
            ProfileError::NotUtf8(p) => write!(
                f,
                "{p}: the path is not valid UTF-8; move the binary to a path that is"
            ),
            ProfileError::Glob { path, ch } => write!(
                f,
                "{path}: the path contains '{ch}', which AppArmor reads as a pattern \
                 (the profile would also attach to other files); \
                 move the binary to a path without any of * ? [ ] {{ }} ^"
            ),
            ProfileError::Control { path, ch } => write!(
                f,
                "{path}: the path contains the control character {ch:?}; \
                 move the binary to a path without one"
            ),
        }
    }
}

impl std::error::Error for ProfileError {}

/// Characters AppArmor's path patterns give a meaning to (`*`, `**`, `?`,
/// `[...]`, `[^...]`, `{a,b}`; `@{` starts a variable, so no `{` means no
/// variable). A real path holding one is refused rather than escaped: a
/// profile that attaches by pattern is not worth the risk of getting an
/// escape wrong.
const GLOB: &[char] = &['*', '?', '[', ']', '{', '}', '^'];

/// The policy language a profile is written in: its `abi` line, and with
/// it whether the `userns` rule is there. AppArmor 3.0's parser (Debian 12)
/// has no `abi/4.0` and refuses the `userns` rule as a syntax error; its
/// kernels (before Ubuntu's change) have no user-namespace mediation for
/// the rule to lift either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abi {
    V3_0,
    V4_0,
}

impl Abi {
    /// As `--abi` and the `abi` line spell it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Abi::V3_0 => "3.0",
            Abi::V4_0 => "4.0",
        }
    }

    pub fn parse(s: &str) -> Option<Abi> {
        match s {
            "3.0" => Some(Abi::V3_0),
            "4.0" => Some(Abi::V4_0),
            _ => None,
        }
    }
}

/// `apparmor_parser --version`'s version, major and minor, from its first
/// line (`AppArmor parser version 3.0.8`). Pure.
pub fn parser_version(output: &str) -> Option<(u32, u32)> {
    let v = output
        .lines()
        .next()?
        .strip_prefix("AppArmor parser version ")?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Which `abi` to print, and why, from the installed parser's version
/// (`None`: no parser found) and whether the kernel mediates user-namespace
/// creation (AppArmor's `namespaces/userns_create` feature). The parser
/// that will load the profile decides when there is one; without one, the
/// kernel's feature says which parser the machine's AppArmor belongs with.
/// Pure.
pub fn choose_abi(parser: Option<(u32, u32)>, userns_create: bool) -> (Abi, String) {
    match parser {
        Some((major, minor)) if major >= 4 => (
            Abi::V4_0,
            format!("abi 4.0 with the userns rule: apparmor_parser {major}.{minor} is installed"),
        ),
        Some((major, minor)) => (
            Abi::V3_0,
            format!(
                "abi 3.0 without the userns rule: apparmor_parser {major}.{minor} knows neither abi 4.0 nor the rule (`--abi 4.0` prints them anyway)"
            ),
        ),
        None if userns_create => (
            Abi::V4_0,
            "abi 4.0 with the userns rule: no apparmor_parser found, and the kernel mediates user namespaces (namespaces/userns_create)"
                .to_string(),
        ),
        None => (
            Abi::V3_0,
            "abi 3.0 without the userns rule: no apparmor_parser found, and the kernel does not mediate user namespaces (no namespaces/userns_create)"
                .to_string(),
        ),
    }
}

/// Which `abi` this machine's AppArmor takes: asks the installed
/// `apparmor_parser` (also looked for in /usr/sbin and /sbin, which an
/// ordinary user's PATH may lack) and reads the kernel's feature file.
pub fn detect_abi() -> (Abi, String) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<std::path::PathBuf> = std::env::split_paths(&path).collect();
    dirs.extend(["/usr/sbin", "/sbin"].map(std::path::PathBuf::from));
    let parser = dirs
        .iter()
        .map(|d| d.join("apparmor_parser"))
        .find(|p| p.is_file())
        .and_then(|p| std::process::Command::new(p).arg("--version").output().ok())
        .and_then(|o| parser_version(&String::from_utf8_lossy(&o.stdout)));
    choose_abi(parser, Path::new(USERNS_CREATE_FEATURE).exists())
}

/// AppArmor's feature file for user-namespace mediation.
pub const USERNS_CREATE_FEATURE: &str =
    "/sys/kernel/security/apparmor/features/namespaces/userns_create";

/// The profile for the binary at `exe`, which must be absolute and
/// canonical (the caller resolves links): it attaches to that one path,
/// allows user namespaces (`abi` 4.0; 3.0 has no such rule), and is
/// otherwise unconfined.
pub fn profile(exe: &Path, abi: Abi) -> Result<String, ProfileError> {
    let shown = exe.display().to_string();
    // Checked on the bytes: `Path::components` folds `.`, `//` and a
    // trailing `/` away.
    let canonical = match exe.as_os_str().as_bytes().strip_prefix(b"/") {
        Some(rest) => rest
            .split(|&b| b == b'/')
            .all(|seg| !matches!(seg, b"" | b"." | b"..")),
        None => false,
    };
    if !canonical {
        return Err(ProfileError::NotCanonical(shown));
    }
    let path = exe.to_str().ok_or(ProfileError::NotUtf8(shown))?;
    if let Some(ch) = path.chars().find(|c| c.is_control()) {
        return Err(ProfileError::Control {
            path: path.escape_debug().to_string(),
            ch,
        });
    }
    if let Some(ch) = path.chars().find(|c| GLOB.contains(c)) {
        return Err(ProfileError::Glob {
            path: path.to_string(),
            ch,
        });
    }
    Ok(format!(
        "# AppArmor profile for reachweaver-mcp, printed by `reachweaver-mcp sandbox apparmor-profile`.\n\
         #\n\
         # Where {SYSCTL}=1, unprivileged programs get no\n\
         # capabilities inside a user namespace unless their profile allows `userns`;\n\
         # the sandbox needs them. This profile allows user namespaces to the one\n\
         # binary named below and confines nothing else. It names the binary's path:\n\
         # print it again after moving the binary.\n\
         \n\
         abi <abi/{}>,\n\
         include <tunables/global>\n\
         \n\
         profile {PROFILE_NAME} {} flags=(unconfined) {{\n\
         {}\
         \x20 # Local additions, kept across updates of this file.\n\
         \x20 include if exists <local/{PROFILE_NAME}>\n\
         }}\n",
        abi.as_str(),
        quoted(path),
        match abi {
            Abi::V4_0 => "  userns,\n\n",
            // Nothing to lift where the parser has no such rule: those
            // kernels don't mediate user namespaces.
            Abi::V3_0 => "",
        }
    ))
}

/// A path as an AppArmor quoted string: inside the quotes only `"` and the
/// escape character itself need escaping (a space, `#` or `,` is literal).
fn quoted(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 2);
    out.push('"');
    for c in path.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    fn text(s: &str) -> Read {
        Read::Text(s.to_string())
    }

    fn sysctl(r: Read) -> Sysctl {
        interpret(&r, &text("Y\n"), &Read::Absent).sysctl
    }

    #[test]
    fn sysctl_values_at_their_exact_boundaries() {
        assert_eq!(sysctl(Read::Absent), Sysctl::Absent);
        assert_eq!(sysctl(text("0\n")), Sysctl::Off);
        assert_eq!(sysctl(text("0")), Sysctl::Off);
        assert_eq!(sysctl(text("1\n")), Sysctl::On);
        assert_eq!(sysctl(text("1")), Sysctl::On);
        for odd in [
            "", "\n", "2\n", "01\n", "1\n\n", " 1\n", "1 \n", "yes\n", "-1\n",
        ] {
            assert_eq!(
                sysctl(text(odd)),
                Sysctl::Unrecognised(odd.into()),
                "{odd:?}"
            );
        }
        assert_eq!(
            sysctl(Read::Failed("Permission denied".into())),
            Sysctl::Unrecognised("unreadable: Permission denied".into())
        );
    }

    #[test]
    fn apparmor_is_enabled_only_when_its_parameter_reads_y() {
        let enabled = |r: Read| interpret(&text("1\n"), &r, &Read::Absent).enabled;
        assert!(enabled(text("Y\n")));
        assert!(enabled(text("Y")));
        for not in [
            Read::Absent,
            text("N\n"),
            text(""),
            text("y\n"),
            text("YY\n"),
            Read::Failed("x".into()),
        ] {
            assert!(!enabled(not.clone()), "{not:?}");
        }
    }

    #[test]
    fn restricted_needs_the_sysctl_on_and_apparmor_enabled() {
        let r = |s: &str, e: &str| interpret(&text(s), &text(e), &Read::Absent).restricted();
        assert!(r("1\n", "Y\n"));
        assert!(!r("1\n", "N\n"));
        assert!(!r("0\n", "Y\n"));
        assert!(!r("", "Y\n"));
        assert!(!interpret(&Read::Absent, &text("Y\n"), &Read::Absent).restricted());
    }

    #[test]
    fn the_label_names_the_profile_in_force() {
        let p = |l: &str| interpret(&text("1\n"), &text("Y\n"), &text(l)).profile;
        assert_eq!(p("unconfined\n"), None);
        assert_eq!(p("unconfined"), None);
        assert_eq!(p(""), None);
        assert_eq!(
            p("reachweaver-mcp (unconfined)\n").as_deref(),
            Some("reachweaver-mcp")
        );
        assert_eq!(
            p("/usr/bin/foo (enforce)\n").as_deref(),
            Some("/usr/bin/foo")
        );
        assert_eq!(
            p("/opt/a (b)/x (complain)\n").as_deref(),
            Some("/opt/a (b)/x")
        );
        assert_eq!(
            interpret(&text("1\n"), &text("Y\n"), &Read::Absent).profile,
            None
        );
    }

    #[test]
    fn the_status_line_for_each_state() {
        let line = |s: Read, e: &str, l: Read| interpret(&s, &text(e), &l).report();
        let on = line(text("1\n"), "Y\n", text("unconfined\n"));
        assert_eq!(
            on.detail,
            "unprivileged user namespaces restricted \
             (kernel.apparmor_restrict_unprivileged_userns=1); install a profile: \
             reachweaver-mcp sandbox apparmor-profile | sudo tee /etc/apparmor.d/reachweaver-mcp \
             && sudo apparmor_parser -r /etc/apparmor.d/reachweaver-mcp"
        );
        assert_eq!(
            (on.userns_restriction, on.restricted, on.enabled),
            ("on", true, true)
        );
        let held = line(text("1\n"), "Y\n", text("reachweaver-mcp (unconfined)\n"));
        assert!(held.restricted);
        assert!(
            held.detail
                .ends_with("this binary runs under the AppArmor profile reachweaver-mcp"),
            "{}",
            held.detail
        );
        assert_eq!(held.profile.as_deref(), Some("reachweaver-mcp"));
        // Another profile does not count as ours: the hint stays.
        let other = line(text("1\n"), "Y\n", text("/usr/bin/x (enforce)\n"));
        assert!(
            other.detail.contains("install a profile"),
            "{}",
            other.detail
        );
        let disabled = line(text("1\n"), "N\n", Read::Absent);
        assert!(!disabled.restricted);
        assert!(disabled.detail.contains("AppArmor is not enabled"));
        let off = line(text("0\n"), "Y\n", Read::Absent);
        assert_eq!((off.userns_restriction, off.restricted), ("off", false));
        assert_eq!(
            off.detail,
            "unprivileged user namespaces not restricted \
             (kernel.apparmor_restrict_unprivileged_userns=0)"
        );
        let absent = line(Read::Absent, "N\n", Read::Absent);
        assert_eq!(absent.userns_restriction, "not_present");
        assert_eq!(
            absent.detail,
            "no user namespace restriction on this kernel \
             (kernel.apparmor_restrict_unprivileged_userns not present)"
        );
        let odd = line(text("7\n"), "Y\n", Read::Absent);
        assert_eq!(odd.userns_restriction, "unrecognised");
        assert!(!odd.restricted);
        assert!(odd.detail.contains("reads \"7\\n\""), "{}", odd.detail);
    }

    fn golden(name: &str, got: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/sandbox/linux/golden")
            .join(name);
        if std::env::var_os("REACHWEAVER_UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, got).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (set REACHWEAVER_UPDATE_GOLDEN=1 to create)",
                path.display()
            )
        });
        assert_eq!(
            got, want,
            "golden {name} differs (REACHWEAVER_UPDATE_GOLDEN=1 refreshes)"
        );
    }

    #[test]
    fn the_abi_3_profile_matches_golden() {
        let p = profile(Path::new("/usr/local/bin/reachweaver-mcp"), Abi::V3_0).unwrap();
        golden("apparmor-profile-abi3", &p);
        assert!(!p.contains("userns,"), "{p}");
        assert!(!p.contains("abi/4.0"), "{p}");
    }

    #[test]
    fn the_parser_version_is_read_from_its_first_line() {
        for (out, want) in [
            (
                "AppArmor parser version 3.0.8\nCopyright (C) 1999-2008 Novell Inc.\n",
                Some((3, 0)),
            ),
            ("AppArmor parser version 4.0.1\n", Some((4, 0))),
            ("AppArmor parser version 4.1.0~beta1\n", Some((4, 1))),
            ("AppArmor parser version 10.2", Some((10, 2))),
            ("AppArmor parser version 3\n", None),
            ("AppArmor parser version \n", None),
            ("apparmor_parser 4.0.1\n", None),
            ("\nAppArmor parser version 4.0.1\n", None),
            ("", None),
        ] {
            assert_eq!(parser_version(out), want, "{out:?}");
        }
    }

    #[test]
    fn the_abi_follows_the_parser_then_the_kernel() {
        let abi = |p, k| choose_abi(p, k).0;
        // The parser that loads it decides, whatever the kernel mediates.
        assert_eq!(abi(Some((3, 0)), true), Abi::V3_0);
        assert_eq!(abi(Some((3, 1)), false), Abi::V3_0);
        assert_eq!(abi(Some((4, 0)), false), Abi::V4_0);
        assert_eq!(abi(Some((4, 0)), true), Abi::V4_0);
        assert_eq!(abi(Some((5, 0)), false), Abi::V4_0);
        // No parser: the kernel's feature.
        assert_eq!(abi(None, true), Abi::V4_0);
        assert_eq!(abi(None, false), Abi::V3_0);
        assert_eq!(
            choose_abi(Some((3, 0)), true).1,
            "abi 3.0 without the userns rule: apparmor_parser 3.0 knows neither abi 4.0 nor the \
             rule (`--abi 4.0` prints them anyway)"
        );
        for a in [Abi::V3_0, Abi::V4_0] {
            assert_eq!(Abi::parse(a.as_str()), Some(a));
        }
        for bad in ["3", "4", "4.1", " 4.0", "abi/4.0", ""] {
            assert_eq!(Abi::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn profile_matches_golden() {
        let p = profile(Path::new("/usr/local/bin/reachweaver-mcp"), Abi::V4_0).unwrap();
        golden("apparmor-profile", &p);
    }

    fn header(p: &str) -> &str {
        p.lines()
            .find(|l| l.starts_with("profile "))
            .expect("a profile line")
    }

    #[test]
    fn the_path_is_quoted_and_only_quote_and_backslash_are_escaped() {
        for (path, want) in [
            (
                "/opt/my tools/reachweaver-mcp",
                r#""/opt/my tools/reachweaver-mcp""#,
            ),
            ("/opt/a\"b/x", r#""/opt/a\"b/x""#),
            ("/opt/a\\b/x", r#""/opt/a\\b/x""#),
            ("/opt/a\\\"/x", r#""/opt/a\\\"/x""#),
            ("/opt/#,@$!=()<>'é/x", r#""/opt/#,@$!=()<>'é/x""#),
            ("/x", r#""/x""#),
        ] {
            let p = profile(Path::new(path), Abi::V4_0).unwrap();
            assert_eq!(
                header(&p),
                format!("profile reachweaver-mcp {want} flags=(unconfined) {{"),
                "{path}"
            );
        }
    }

    #[test]
    fn glob_characters_are_refused_by_name() {
        for ch in ['*', '?', '[', ']', '{', '}', '^'] {
            let path = format!("/opt/a{ch}b/reachweaver-mcp");
            let err = profile(Path::new(&path), Abi::V4_0).unwrap_err();
            assert_eq!(
                err,
                ProfileError::Glob {
                    path: path.clone(),
                    ch
                }
            );
            assert!(
                err.to_string().contains(&format!("contains '{ch}'")),
                "{err}"
            );
        }
        // The first one found is named.
        assert_eq!(
            profile(Path::new("/opt/{a}*/x"), Abi::V4_0).unwrap_err(),
            ProfileError::Glob {
                path: "/opt/{a}*/x".into(),
                ch: '{'
            }
        );
    }

    #[test]
    fn control_characters_are_refused() {
        for ch in ['\n', '\r', '\t', '\0', '\u{1b}', '\u{7f}', '\u{85}'] {
            let path = format!("/opt/a{ch}b/x");
            match profile(Path::new(&path), Abi::V4_0) {
                Err(ProfileError::Control { ch: got, .. }) => assert_eq!(got, ch),
                other => panic!("{path:?}: {other:?}"),
            }
        }
        let err = profile(Path::new("/opt/a\nb/x"), Abi::V4_0)
            .unwrap_err()
            .to_string();
        assert!(
            !err.contains('\n'),
            "the message stays on one line: {err:?}"
        );
    }

    #[test]
    fn only_absolute_canonical_utf8_paths_get_a_profile() {
        for bad in [
            "",
            "/",
            "reachweaver-mcp",
            "bin/reachweaver-mcp",
            "/usr/./bin/x",
            "/usr/../bin/x",
            "/usr//bin/x",
            "/usr/bin/x/",
            "/usr/bin/..",
        ] {
            assert_eq!(
                profile(Path::new(bad), Abi::V4_0),
                Err(ProfileError::NotCanonical(bad.into())),
                "{bad:?}"
            );
        }
        let latin1 = Path::new(OsStr::from_bytes(b"/opt/caf\xe9/x"));
        assert!(matches!(
            profile(latin1, Abi::V4_0),
            Err(ProfileError::NotUtf8(_))
        ));
    }

    #[test]
    fn the_profile_allows_userns_and_is_otherwise_unconfined() {
        // The profile's lines that are rules: no blank line, no comment.
        fn rules(p: &str) -> Vec<&str> {
            p.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("# "))
                .filter(|l| *l != "#")
                .collect()
        }
        let p = profile(Path::new("/usr/bin/reachweaver-mcp"), Abi::V4_0).unwrap();
        assert_eq!(
            rules(&p),
            [
                "abi <abi/4.0>,",
                "include <tunables/global>",
                "profile reachweaver-mcp \"/usr/bin/reachweaver-mcp\" flags=(unconfined) {",
                "userns,",
                "include if exists <local/reachweaver-mcp>",
                "}",
            ]
        );
        let abi3 = profile(Path::new("/usr/bin/reachweaver-mcp"), Abi::V3_0).unwrap();
        assert_eq!(
            rules(&abi3),
            [
                "abi <abi/3.0>,",
                "include <tunables/global>",
                "profile reachweaver-mcp \"/usr/bin/reachweaver-mcp\" flags=(unconfined) {",
                "include if exists <local/reachweaver-mcp>",
                "}",
            ]
        );
        // No comment line may read as a directive (`#include`).
        assert!(!p.lines().any(|l| l.trim_start().starts_with("#include")));
    }
}
