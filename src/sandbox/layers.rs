//! The one list of sandbox layers: [`Layer`]. Everything that names a layer
//! derives from it: `sandbox status`, the start-up line, the per-call
//! attestation (`_meta["io.reachweaver/sandbox"]` and the log line's
//! `sandbox=` code), `policy::Layers` (a [`LayerSet`]), the `--without` values, the
//! probe's holders, and the layer table in `sandbox/LAYERS.md` (a test here
//! checks that it lists exactly these names and letters).
//!
//! What adding a layer takes is the checklist in `sandbox/LAYERS.md`
//! ("Adding a layer"): a member here, then every exhaustive `match` the
//! build names (`ci/check_layer_exhaustive.sh` checks it names them all).

use clap::builder::PossibleValue;

/// Declares [`Layer`] and [`Layer::ALL`] from one list, so `ALL` can't
/// miss a member.
macro_rules! layer_list {
    ($($(#[$doc:meta])* $member:ident,)*) => {
        /// One sandbox layer.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Layer {
            $($(#[$doc])* $member,)*
        }

        impl Layer {
            /// Every layer, in the order of the layer table. Not the order
            /// in time: a read-only run's rlimits, Landlock, caps and
            /// seccomp are armed in its spare init before its request
            /// arrives, and its cgroup is entered only after.
            pub const ALL: &'static [Layer] = &[$(Layer::$member,)*];
        }
    };
}

layer_list! {
    Userns,
    Netns,
    Ipcns,
    Utsns,
    Pidns,
    PidMax,
    Mountns,
    Cgroup,
    Rlimits,
    Landlock,
    /// Landlock's TCP rules (ABI 4).
    LandlockTcp,
    /// Landlock's scoping of abstract sockets and signals (ABI 6).
    LandlockScope,
    Caps,
    Seccomp,
    /// The macOS sandbox: a Seatbelt profile.
    SandboxExec,
}

/// The layers `--without` can switch off, in the order its help and its
/// errors list them; exactly the members whose [`Layer::switch_off_help`]
/// is `Some` (checked when this compiles).
pub const WITHOUT: &[Layer] = &[
    Layer::Landlock,
    Layer::Seccomp,
    Layer::Netns,
    Layer::Caps,
    Layer::Mountns,
    Layer::Pidns,
    Layer::LandlockTcp,
    Layer::LandlockScope,
    Layer::Utsns,
];

const _: () = {
    let mut i = 0;
    while i < Layer::ALL.len() {
        let l = Layer::ALL[i];
        let mut listed = 0;
        let mut j = 0;
        while j < WITHOUT.len() {
            if WITHOUT[j] as u8 == l as u8 {
                listed += 1;
            }
            j += 1;
        }
        assert!(
            listed == if l.switch_off_help().is_some() { 1 } else { 0 },
            "WITHOUT must list each layer --without can switch off, once"
        );
        i += 1;
    }
};

impl Layer {
    /// As `sandbox status --json`, the attestation and `--without` spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Layer::Userns => "userns",
            Layer::Netns => "netns",
            Layer::Ipcns => "ipcns",
            Layer::Utsns => "utsns",
            Layer::Pidns => "pidns",
            Layer::PidMax => "pid_max",
            Layer::Mountns => "mountns",
            Layer::Cgroup => "cgroup",
            Layer::Rlimits => "rlimits",
            Layer::Landlock => "landlock",
            Layer::LandlockTcp => "landlock_tcp",
            Layer::LandlockScope => "landlock_scope",
            Layer::Caps => "caps",
            Layer::Seccomp => "seccomp",
            Layer::SandboxExec => "sandbox_exec",
        }
    }

    /// The letter the call log line writes for it.
    pub const fn code(self) -> char {
        match self {
            Layer::Userns => 'U',
            Layer::Netns => 'N',
            Layer::Ipcns => 'I',
            Layer::Utsns => 'H',
            Layer::Pidns => 'P',
            Layer::PidMax => 'p',
            Layer::Mountns => 'M',
            Layer::Cgroup => 'G',
            Layer::Rlimits => 'R',
            Layer::Landlock => 'L',
            Layer::LandlockTcp => 'T',
            Layer::LandlockScope => 'S',
            Layer::Caps => 'K',
            Layer::Seccomp => 'C',
            Layer::SandboxExec => 'X',
        }
    }

    /// What it holds, as `sandbox status` says it.
    pub const fn holds(self) -> &'static str {
        match self {
            Layer::Userns => "a user namespace: no root, no capability over the host",
            Layer::Netns => "an empty network namespace: nothing routes anywhere",
            Layer::Ipcns => "a private IPC namespace",
            Layer::Utsns => {
                "a UTS namespace: the run sees a fixed host and domain name, not the machine's"
            }
            Layer::Pidns => {
                "a PID namespace: no other process is visible, the run's tree dies with it"
            }
            Layer::PidMax => "the process count bounded inside the PID namespace",
            Layer::Mountns => {
                "a minimal root: only granted paths, minimal /dev, the run's own proc, capped \
                 noexec /tmp"
            }
            Layer::Cgroup => {
                "a cgroup v2 per run bounding its memory (swap included) and process count as a \
                 whole"
            }
            Layer::Rlimits => {
                "no core files; address space, file size, descriptors and processes bounded"
            }
            Layer::Landlock => "file system rules",
            Layer::LandlockTcp => "TCP bind and connect denied",
            Layer::LandlockScope => "abstract unix sockets and signals scoped to the run",
            Layer::Caps => "every capability dropped, securebits locked, no_new_privs",
            Layer::Seccomp => "a system call allow-list",
            Layer::SandboxExec => "a deny-by-default Seatbelt profile (macOS)",
        }
    }

    /// Whether the owner (or the probe's layer matrix) can switch it off
    /// with `--without`: `Some` with what `--without`'s help says of it
    /// (empty: its name says it), `None` when it can't be.
    pub const fn switch_off_help(self) -> Option<&'static str> {
        match self {
            Layer::Landlock | Layer::Seccomp | Layer::Netns | Layer::Caps | Layer::Mountns => {
                Some("")
            }
            Layer::Pidns => Some(
                "The run's own PID namespace (and with it the zygote shape and the minimal \
                 root): runs then use the re-executed helper, the shape machines without PID \
                 namespaces get",
            ),
            Layer::LandlockTcp => {
                Some("Landlock's TCP rules alone (a kernel with Landlock ABI 1 to 3 has none)")
            }
            Layer::LandlockScope => Some(
                "Landlock's scoping of abstract sockets and signals alone (ABI 1 to 5 has none)",
            ),
            Layer::Utsns => Some("The run's own UTS namespace (its host and domain name)"),
            Layer::Userns
            | Layer::Ipcns
            | Layer::PidMax
            | Layer::Cgroup
            | Layer::Rlimits
            | Layer::SandboxExec => None,
        }
    }

    /// Whether `--without` can switch it off.
    pub const fn can_be_switched_off(self) -> bool {
        self.switch_off_help().is_some()
    }

    /// The layer of a name.
    pub fn from_name(name: &str) -> Option<Layer> {
        Layer::ALL.iter().copied().find(|l| l.name() == name)
    }
}

/// A layer crosses the wire (to the helper, on the status pipe) by its
/// stable name, so a renamed member can't change what the other side reads.
impl serde::Serialize for Layer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Layer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Layer, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Layer::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("no sandbox layer is named {name:?}")))
    }
}

/// A set of layers: one bit per member of [`Layer::ALL`], iterated in its
/// order. On the wire it is the list of the members' names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LayerSet(u32);

// One bit per layer must fit.
const _: () = assert!(Layer::ALL.len() <= u32::BITS as usize);

impl LayerSet {
    /// No layer.
    pub const EMPTY: LayerSet = LayerSet(0);

    const fn bit(layer: Layer) -> u32 {
        1 << layer as u32
    }

    /// Whether `layer` is in the set.
    pub const fn has(self, layer: Layer) -> bool {
        self.0 & Self::bit(layer) != 0
    }

    /// Puts `layer` in the set.
    pub fn insert(&mut self, layer: Layer) {
        self.0 |= Self::bit(layer);
    }

    /// Takes `layer` out of the set.
    pub fn remove(&mut self, layer: Layer) {
        self.0 &= !Self::bit(layer);
    }

    /// Puts `layer` in the set or takes it out.
    pub fn set(&mut self, layer: Layer, on: bool) {
        if on {
            self.insert(layer)
        } else {
            self.remove(layer)
        }
    }

    /// The members, in [`Layer::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Layer> {
        Layer::ALL.iter().copied().filter(move |l| self.has(*l))
    }

    /// The members' names, in [`Layer::ALL`]'s order.
    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(Layer::name).collect()
    }

    /// Whether no layer is in the set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl FromIterator<Layer> for LayerSet {
    fn from_iter<I: IntoIterator<Item = Layer>>(it: I) -> LayerSet {
        let mut set = LayerSet::EMPTY;
        for l in it {
            set.insert(l);
        }
        set
    }
}

impl serde::Serialize for LayerSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for LayerSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LayerSet, D::Error> {
        Ok(Vec::<Layer>::deserialize(d)?.into_iter().collect())
    }
}

/// `--without`'s values: the layers that can be switched off.
impl clap::ValueEnum for Layer {
    fn value_variants<'a>() -> &'a [Self] {
        WITHOUT
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let value = PossibleValue::new(self.name());
        match self.switch_off_help()? {
            "" => Some(value),
            help => Some(value.help(help)),
        }
    }
}

/// What a run was confined by, carried on every tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    /// The layers in force.
    pub layers: LayerSet,
    /// SHA-256 of the run's serialized policy.
    pub policy_sha256: String,
    /// What the run tried and was refused, once it is over.
    pub denied: Option<crate::sandbox::denied::Denied>,
}

impl Attestation {
    /// From the applied layers and the policy text sent to the helper.
    pub fn new(layers: LayerSet, policy: &[u8]) -> Attestation {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(policy);
        let policy_sha256 = digest.iter().map(|b| format!("{b:02x}")).collect();
        Attestation {
            layers,
            policy_sha256,
            denied: None,
        }
    }

    /// The `_meta` value: layer names in list order.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"layers": self.layers, "policy_sha256": self.policy_sha256})
    }

    /// The log line's short form (`UNIHPpMRLTSKC`), in list order.
    pub fn code(&self) -> String {
        self.layers.iter().map(Layer::code).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_are_unique() {
        for (i, a) in Layer::ALL.iter().enumerate() {
            for b in &Layer::ALL[i + 1..] {
                assert_ne!(a.name(), b.name());
                assert_ne!(a.code(), b.code(), "{a:?} and {b:?}");
            }
            assert_eq!(Layer::from_name(a.name()), Some(*a));
        }
        assert_eq!(Layer::from_name("bogus"), None);
    }

    #[test]
    fn attestation_orders_layers_and_hashes_the_policy() {
        let a = Attestation::new(
            [Layer::Seccomp, Layer::Userns, Layer::Landlock]
                .into_iter()
                .collect(),
            b"abc",
        );
        assert_eq!(a.layers.names(), ["userns", "landlock", "seccomp"]);
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
        let every = Attestation::new(Layer::ALL.iter().copied().collect(), b"");
        let letters: String = Layer::ALL.iter().map(|l| l.code()).collect();
        assert_eq!(every.code(), letters);
    }

    #[test]
    fn a_layer_set_holds_each_member_once_and_crosses_the_wire_by_name() {
        let mut set = LayerSet::EMPTY;
        assert!(set.is_empty());
        for l in Layer::ALL.iter().rev() {
            set.insert(*l);
            set.insert(*l);
        }
        assert_eq!(set.iter().collect::<Vec<_>>(), Layer::ALL);
        set.remove(Layer::Caps);
        assert!(!set.has(Layer::Caps) && set.has(Layer::Seccomp));
        set.set(Layer::Caps, true);
        let text = serde_json::to_string(&set).expect("a set serializes");
        assert!(text.starts_with(r#"["userns","netns","#), "{text}");
        let back: LayerSet = serde_json::from_str(&text).expect("and reads back");
        assert_eq!(back, set);
        assert!(serde_json::from_str::<LayerSet>(r#"["bogus"]"#).is_err());
    }

    #[test]
    fn a_policy_names_its_layers_in_list_order() {
        use crate::sandbox::policy::Layers;
        assert!(Layers::default().names().is_empty());
        let linux: Vec<Layer> = Layer::ALL
            .iter()
            .copied()
            .filter(|l| *l != Layer::SandboxExec)
            .collect();
        let mut every = Layers::of(&linux);
        // The two layers that carry a value are on only with it.
        assert!(!every.has(Layer::PidMax) && !every.has(Layer::Landlock));
        every.set_pid_max(Some(512));
        every.set_landlock_abi(Some(6));
        let names: Vec<&str> = linux.iter().map(|l| l.name()).collect();
        assert_eq!(every.names(), names);
        let mut some = Layers::of(&[Layer::Seccomp]);
        some.set_pid_max(Some(512));
        some.set_landlock_abi(Some(1));
        assert_eq!(some.names(), ["pid_max", "landlock", "seccomp"]);
        assert!(some.has(Layer::Landlock) && !some.has(Layer::LandlockTcp));
        some.remove(Layer::Landlock);
        assert_eq!(
            (some.has(Layer::Landlock), some.landlock_abi()),
            (false, None)
        );
        some.set_pid_max(None);
        assert_eq!((some.has(Layer::PidMax), some.pid_max()), (false, None));
    }

    /// The rows of `sandbox/LAYERS.md`'s layer table: name and letter.
    fn documented_rows(doc: &str) -> Vec<(String, String)> {
        doc.lines()
            .skip_while(|l| !l.starts_with("| layer | letter | holds |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells[1].trim_matches('`').to_string(), cells[2].to_string())
            })
            .collect()
    }

    #[test]
    fn the_documented_table_lists_exactly_the_layers_with_their_letters() {
        let rows = documented_rows(include_str!("../../sandbox/LAYERS.md"));
        let want: Vec<(String, String)> = Layer::ALL
            .iter()
            .map(|l| (l.name().to_string(), l.code().to_string()))
            .collect();
        assert_eq!(rows, want, "sandbox/LAYERS.md's layer table");
    }

    #[test]
    fn without_offers_exactly_the_layers_that_can_be_switched_off() {
        use clap::ValueEnum;
        let values: Vec<String> = Layer::value_variants()
            .iter()
            .filter_map(|l| l.to_possible_value())
            .map(|v| v.get_name().to_string())
            .collect();
        assert_eq!(
            values,
            [
                "landlock",
                "seccomp",
                "netns",
                "caps",
                "mountns",
                "pidns",
                "landlock_tcp",
                "landlock_scope",
                "utsns"
            ]
        );
        let off: Vec<Layer> = Layer::ALL
            .iter()
            .copied()
            .filter(|l| l.can_be_switched_off())
            .collect();
        assert_eq!(off.len(), WITHOUT.len());
        for l in Layer::ALL {
            assert_eq!(l.to_possible_value().is_some(), l.can_be_switched_off());
        }
        // The values parse back to their layer; the others are refused.
        for l in WITHOUT {
            assert_eq!(Layer::from_str(l.name(), false), Ok(*l));
        }
        assert!(Layer::from_str("userns", false).is_err());
        // And sandbox/LAYERS.md lists the same values.
        let doc = include_str!("../../sandbox/LAYERS.md");
        let at = doc
            .find("`sandbox probe --without LAYER` switches one layer off for testing")
            .expect("sandbox/LAYERS.md says what --without switches off");
        let listed = &doc[at..];
        let listed = &listed[listed.find('(').unwrap_or(0)..listed.find(')').unwrap_or(0)];
        let mut documented: Vec<&str> = listed.split('`').skip(1).step_by(2).collect();
        documented.sort_unstable();
        let mut want: Vec<&str> = WITHOUT.iter().map(|l| l.name()).collect();
        want.sort_unstable();
        assert_eq!(documented, want);
    }
}
