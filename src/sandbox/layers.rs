//! The one list of sandbox layers. `sandbox status`, the start-up line,
//! the per-call attestation (`_meta["io.reachweaver/sandbox"]` and the log
//! line's `sandbox=` code) and the documentation's table all name layers
//! from here, so a new layer is one entry here and one file that applies it.

/// One layer: its name (as `sandbox status --json` and the attestation
/// spell it), the letter the call log line uses, and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerInfo {
    pub name: &'static str,
    pub code: char,
    pub holds: &'static str,
}

/// Every layer, in the order a run applies them.
pub const LAYERS: &[LayerInfo] = &[
    LayerInfo {
        name: "userns",
        code: 'U',
        holds: "a user namespace: no root, no capability over the host",
    },
    LayerInfo {
        name: "netns",
        code: 'N',
        holds: "an empty network namespace: nothing routes anywhere",
    },
    LayerInfo {
        name: "ipcns",
        code: 'I',
        holds: "a private IPC namespace",
    },
    LayerInfo {
        name: "utsns",
        code: 'H',
        holds: "a UTS namespace: the run sees a fixed host and domain name, not the machine's",
    },
    LayerInfo {
        name: "pidns",
        code: 'P',
        holds: "a PID namespace: no other process is visible, the run's tree dies with it",
    },
    LayerInfo {
        name: "pid_max",
        code: 'p',
        holds: "the process count bounded inside the PID namespace",
    },
    LayerInfo {
        name: "mountns",
        code: 'M',
        holds: "a minimal root: only granted paths, minimal /dev, the run's own proc, capped noexec /tmp",
    },
    LayerInfo {
        name: "cgroup",
        code: 'G',
        holds: "a cgroup v2 per run bounding its memory (swap included) and process count as a whole",
    },
    LayerInfo {
        name: "rlimits",
        code: 'R',
        holds: "no core files; address space, file size, descriptors and processes bounded",
    },
    LayerInfo {
        name: "landlock",
        code: 'L',
        holds: "file system rules",
    },
    LayerInfo {
        name: "landlock_tcp",
        code: 'T',
        holds: "TCP bind and connect denied",
    },
    LayerInfo {
        name: "landlock_scope",
        code: 'S',
        holds: "abstract unix sockets and signals scoped to the run",
    },
    LayerInfo {
        name: "caps",
        code: 'K',
        holds: "every capability dropped, securebits locked, no_new_privs",
    },
    LayerInfo {
        name: "seccomp",
        code: 'C',
        holds: "a system call allow-list",
    },
    LayerInfo {
        name: "sandbox_exec",
        code: 'X',
        holds: "a deny-by-default Seatbelt profile (macOS)",
    },
];

/// The entry of a layer name.
pub fn info(name: &str) -> Option<&'static LayerInfo> {
    LAYERS.iter().find(|l| l.name == name)
}

/// The short code of a set of layer names, in list order (`UNIHPpMRLTSKC`).
pub fn codes(names: &[&str]) -> String {
    LAYERS
        .iter()
        .filter(|l| names.contains(&l.name))
        .map(|l| l.code)
        .collect()
}

/// What a run was confined by, carried on every tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    /// Layer names, in list order.
    pub layers: Vec<&'static str>,
    /// SHA-256 of the run's serialized policy.
    pub policy_sha256: String,
}

impl Attestation {
    /// From the applied layer names and the policy text sent to the helper.
    pub fn new(layers: &[&'static str], policy: &[u8]) -> Attestation {
        use sha2::{Digest, Sha256};
        let mut ordered: Vec<&'static str> = LAYERS
            .iter()
            .map(|l| l.name)
            .filter(|n| layers.contains(n))
            .collect();
        ordered.dedup();
        let digest = Sha256::digest(policy);
        let policy_sha256 = digest.iter().map(|b| format!("{b:02x}")).collect();
        Attestation {
            layers: ordered,
            policy_sha256,
        }
    }

    /// The `_meta` value.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"layers": self.layers, "policy_sha256": self.policy_sha256})
    }

    /// The log line's short form.
    pub fn code(&self) -> String {
        codes(&self.layers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_are_unique() {
        for (i, a) in LAYERS.iter().enumerate() {
            for b in &LAYERS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.code, b.code, "{} and {}", a.name, b.name);
            }
        }
    }

    #[test]
    fn attestation_orders_layers_and_hashes_the_policy() {
        let a = Attestation::new(&["seccomp", "userns", "landlock", "bogus"], b"abc");
        assert_eq!(a.layers, ["userns", "landlock", "seccomp"]);
        // SHA-256("abc"), the FIPS 180-2 example.
        assert_eq!(
            a.policy_sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(a.code(), "ULC");
        assert_eq!(
            a.to_json(),
            serde_json::json!({"layers": ["userns", "landlock", "seccomp"], "policy_sha256": a.policy_sha256})
        );
    }

    #[test]
    fn the_documented_table_lists_every_layer_with_its_letter() {
        let doc = include_str!("../../sandbox/LAYERS.md");
        for l in LAYERS {
            let row = format!("| `{}` | {} |", l.name, l.code);
            assert!(doc.contains(&row), "sandbox/LAYERS.md lacks the row {row}");
        }
    }

    #[test]
    fn every_layer_that_can_be_switched_off_is_listed() {
        use clap::ValueEnum;
        for l in crate::sandbox::Layer::value_variants() {
            assert!(info(l.name()).is_some(), "{l:?}");
        }
    }

    #[test]
    fn every_status_name_of_the_linux_sandbox_is_listed() {
        for n in [
            "userns",
            "netns",
            "ipcns",
            "utsns",
            "pidns",
            "pid_max",
            "mountns",
            "cgroup",
            "landlock",
            "landlock_tcp",
            "landlock_scope",
            "seccomp",
            "caps",
            "rlimits",
        ] {
            assert!(info(n).is_some(), "{n}");
        }
    }
}
