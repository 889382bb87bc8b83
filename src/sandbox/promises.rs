//! What a run is promised, and which layers hold each promise on this
//! machine. The README and `sandbox/LAYERS.md` make these promises; the
//! layers are only the means. Start-up refuses (in `require` mode) when a
//! promise every run must have is held by nothing here, withholds a
//! feature whose promise is held by nothing, and names on the start-up
//! line and in `sandbox status` what holds each one. Pure: built from the
//! layer set decided at start.

use super::policy::Layers;
use super::Layer;

/// How a promise is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Every run, on every machine: where nothing holds it, `require` mode
    /// refuses to start.
    Always,
    /// Where the kernel gives the layer that holds it; the start-up line
    /// names each one not held here.
    WhereAvailable,
    /// Only with a feature the owner turns on (`--allow-drafts`): where
    /// nothing holds it, the feature is withheld in `require` mode.
    Feature,
}

/// One promise and what holds it here.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PromiseStatus {
    pub id: &'static str,
    pub text: &'static str,
    pub tier: Tier,
    /// The layers (or server mechanisms) that hold it here; empty: not held.
    pub held_by: Vec<Holder>,
    /// What would hold it, said when nothing does.
    pub needs: &'static str,
}

impl PromiseStatus {
    pub fn held(&self) -> bool {
        !self.held_by.is_empty()
    }
}

/// What holds a promise: a layer, or what every run has whatever its
/// layers. `sandbox status --json` and the start-up line write its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    Layer(Layer),
    /// `no_new_privs`, set in every run.
    NoNewPrivs,
    /// The run's helper as its child subreaper, where there is no PID
    /// namespace.
    Subreaper,
}

impl Holder {
    pub const fn name(self) -> &'static str {
        match self {
            Holder::Layer(l) => l.name(),
            Holder::NoNewPrivs => "no_new_privs",
            Holder::Subreaper => "subreaper",
        }
    }
}

impl serde::Serialize for Holder {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The facts beyond the layer set that decide a promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Facts {
    /// The server runs as uid 0, which `RLIMIT_NPROC` does not bind.
    pub root: bool,
    /// The database sits alone in its folder (no other entry), so Landlock's
    /// rules alone keep a draft run to the database and its companions.
    pub db_alone: bool,
}

/// Names `layer` in `list` when `cond` holds.
fn on(list: &mut Vec<Holder>, cond: bool, layer: Layer) {
    if cond {
        list.push(Holder::Layer(layer));
    }
}

/// Names `layer` in `list` when the run applies it.
fn with(list: &mut Vec<Holder>, l: &Layers, layer: Layer) {
    on(list, l.has(layer), layer);
}

/// What holds writes where Landlock does: Landlock alone from ABI 3; below
/// it, Landlock with seccomp, which refuses `truncate(2)` by path (the one
/// write Landlock doesn't judge there). Empty without Landlock, or below
/// ABI 3 without seccomp.
fn landlock_writes(l: &Layers) -> Vec<Holder> {
    if !l.has(Layer::Landlock) {
        Vec::new()
    } else if l.landlock_truncates() {
        vec![Holder::Layer(Layer::Landlock)]
    } else if l.has(Layer::Seccomp) {
        vec![
            Holder::Layer(Layer::Landlock),
            Holder::Layer(Layer::Seccomp),
        ]
    } else {
        Vec::new()
    }
}

/// Every promise, in the order the README lists them. Pure.
pub fn assess(l: &Layers, f: Facts) -> Vec<PromiseStatus> {
    let mut out = Vec::new();
    let mut push = |id, text, tier, held_by: Vec<Holder>, needs| {
        out.push(PromiseStatus {
            id,
            text,
            tier,
            held_by,
            needs,
        })
    };

    // seccomp refuses every socket family and the network namespace has no
    // route: either holds the whole promise. Landlock's TCP rules hold TCP
    // only, so they are named but never enough alone.
    let mut net = Vec::new();
    with(&mut net, l, Layer::Netns);
    with(&mut net, l, Layer::Seccomp);
    if !net.is_empty() {
        with(&mut net, l, Layer::LandlockTcp);
    }
    push(
        "no_network",
        "no network",
        Tier::Always,
        net,
        "seccomp or a network namespace",
    );

    let mut fs = Vec::new();
    with(&mut fs, l, Layer::Mountns);
    with(&mut fs, l, Layer::Landlock);
    push(
        "reads_confined",
        "reads limited to the root, the home's fixed files, the database and the runtime",
        Tier::Always,
        fs,
        "Landlock or the mount layer",
    );
    let landlock_writes = landlock_writes(l);
    let mut writes = Vec::new();
    with(&mut writes, l, Layer::Mountns);
    writes.extend(landlock_writes.iter().copied());
    push(
        "writes_confined",
        "no writing outside TMPDIR (a draft: and the database)",
        Tier::Always,
        writes,
        "Landlock (with seccomp below ABI 3) or the mount layer",
    );

    // no_new_privs is set in every run whatever the layers.
    let mut privs = vec![Holder::NoNewPrivs];
    with(&mut privs, l, Layer::Caps);
    push(
        "no_privileges",
        "no capability and no new privileges",
        Tier::Always,
        privs,
        "",
    );

    // Without a PID namespace the run's helper is its child subreaper and
    // kills every process the run leaves.
    push(
        "nothing_outlives",
        "nothing outlives its call",
        Tier::Always,
        vec![if l.has(Layer::Pidns) {
            Holder::Layer(Layer::Pidns)
        } else {
            Holder::Subreaper
        }],
        "",
    );

    // A killed server runs no clean-up: its sandbox helper dies too (its
    // parent-death signal), and then only a PID namespace, whose init's
    // death takes every process in it, leaves nothing behind. A run's
    // subreaper kills what the run left only while it lives itself.
    let mut killed = Vec::new();
    with(&mut killed, l, Layer::Pidns);
    push(
        "nothing_outlives_server",
        "nothing outlives a killed server",
        Tier::WhereAvailable,
        killed,
        "a PID namespace (without one, the run's helper kills what the run left when the call or \
         the server ends, but nothing does once the helper itself is killed)",
    );

    let mut procs = Vec::new();
    with(&mut procs, l, Layer::PidMax);
    with(&mut procs, l, Layer::Cgroup);
    on(&mut procs, l.has(Layer::Rlimits) && !f.root, Layer::Rlimits);
    push(
        "processes_bounded",
        "a run's processes bounded",
        Tier::Always,
        procs,
        "for a server run as root (RLIMIT_NPROC does not bind root): a PID namespace with its own \
         pid_max (Linux 6.14) or a delegated cgroup v2; or run the server as an ordinary user",
    );

    // RLIMIT_AS bounds each process's own address space; the kernel's
    // buffers for its pipes and sockets are charged to no process, only to
    // the memory cgroup the run is in.
    let mut kmem = Vec::new();
    with(&mut kmem, l, Layer::Cgroup);
    push(
        "kernel_memory_bounded",
        "a run's kernel memory (pipe and socket buffers) bounded",
        Tier::WhereAvailable,
        kmem,
        "a cgroup v2 per run (RLIMIT_AS bounds each process's own memory only)",
    );

    let mut mount = Vec::new();
    with(&mut mount, l, Layer::Mountns);
    push(
        "tmpdir_bounded",
        "TMPDIR bounded (64 MiB, 4,096 files) and gone with the run",
        Tier::WhereAvailable,
        mount.clone(),
        "the mount layer (user and PID namespaces)",
    );
    push(
        "host_hidden",
        "the host not observable (its name; stat, readlink, xattrs of paths outside the grant)",
        Tier::WhereAvailable,
        if l.has(Layer::Mountns) && l.has(Layer::Utsns) {
            vec![Holder::Layer(Layer::Mountns), Holder::Layer(Layer::Utsns)]
        } else {
            Vec::new()
        },
        "the mount layer and a UTS namespace (user and PID namespaces, or root)",
    );
    push(
        "protected_hidden",
        "protected files under the root and home hidden inside runs",
        Tier::WhereAvailable,
        mount,
        "the mount layer (user and PID namespaces); arguments naming them are refused everywhere",
    );

    let mut draft = Vec::new();
    with(&mut draft, l, Layer::Mountns);
    if !l.has(Layer::Mountns) && f.db_alone {
        draft.extend(landlock_writes.iter().copied());
    }
    push(
        "draft_confined",
        "a draft writes only the database and its companions",
        Tier::Feature,
        draft,
        "the mount layer, or a database alone in its folder (then Landlock holds it)",
    );
    out
}

/// The promises every run must have that nothing holds here (`require`
/// mode refuses to start on any). Pure.
pub fn unheld_always(ps: &[PromiseStatus]) -> Vec<String> {
    ps.iter()
        .filter(|p| p.tier == Tier::Always && !p.held())
        .map(|p| format!("{} (needs {})", p.text, p.needs))
        .collect()
}

/// The start-up line's part: each promise held, by what, and those not
/// held here. Pure.
pub fn line(ps: &[PromiseStatus], drafts: bool) -> String {
    let mut held = Vec::new();
    let mut not = Vec::new();
    for p in ps {
        if p.tier == Tier::Feature && !drafts {
            continue;
        }
        if p.held() {
            let by: Vec<&str> = p.held_by.iter().map(|h| h.name()).collect();
            held.push(format!("{}({})", p.id, by.join(" ")));
        } else {
            not.push(p.id);
        }
    }
    let mut s = format!("promises: {}", held.join(" "));
    if !not.is_empty() {
        s.push_str(&format!("; not held here: {}", not.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Layers {
        {
            let mut l = Layers::of(&[
                Layer::Userns,
                Layer::Netns,
                Layer::Ipcns,
                Layer::Utsns,
                Layer::Pidns,
                Layer::LandlockTcp,
                Layer::LandlockScope,
                Layer::Seccomp,
                Layer::Caps,
                Layer::Rlimits,
                Layer::Mountns,
            ])
            .without(Layer::Cgroup);
            l.set_pid_max(Some(512));
            l.ns_limits = true;
            l.set_landlock_abi(Some(7));
            l.caps_bounding = true;
            l
        }
    }

    /// Shape (c) for an ordinary user: no namespace at all.
    fn no_namespaces() -> Layers {
        {
            let mut l = full()
                .without(Layer::Userns)
                .without(Layer::Netns)
                .without(Layer::Ipcns)
                .without(Layer::Utsns)
                .without(Layer::Pidns)
                .without(Layer::Mountns);
            l.set_pid_max(None);
            l.ns_limits = false;
            l.caps_bounding = false;
            l
        }
    }

    fn held(ps: &[PromiseStatus], id: &str) -> Vec<&'static str> {
        ps.iter()
            .find(|p| p.id == id)
            .unwrap()
            .held_by
            .iter()
            .map(|h| h.name())
            .collect()
    }

    #[test]
    fn every_promise_is_held_on_a_full_kernel() {
        let ps = assess(&full().with(Layer::Cgroup), Facts::default());
        assert!(ps.iter().all(PromiseStatus::held), "{ps:?}");
        assert_eq!(held(&ps, "nothing_outlives_server"), vec!["pidns"]);
        assert_eq!(held(&ps, "kernel_memory_bounded"), vec!["cgroup"]);
        // Without a cgroup, kernel memory is the one promise not held.
        let ps = assess(&full(), Facts::default());
        let unheld: Vec<&str> = ps.iter().filter(|p| !p.held()).map(|p| p.id).collect();
        assert_eq!(unheld, ["kernel_memory_bounded"]);
        assert_eq!(
            held(&ps, "no_network"),
            vec!["netns", "seccomp", "landlock_tcp"]
        );
        assert_eq!(held(&ps, "nothing_outlives"), vec!["pidns"]);
        assert_eq!(held(&ps, "processes_bounded"), vec!["pid_max", "rlimits"]);
        assert_eq!(
            line(&ps, false),
            "promises: no_network(netns seccomp landlock_tcp) reads_confined(mountns landlock) \
             writes_confined(mountns landlock) no_privileges(no_new_privs caps) \
             nothing_outlives(pidns) nothing_outlives_server(pidns) \
             processes_bounded(pid_max rlimits) tmpdir_bounded(mountns) \
             host_hidden(mountns utsns) protected_hidden(mountns); \
             not held here: kernel_memory_bounded"
        );
    }

    #[test]
    fn an_ordinary_user_without_namespaces_keeps_every_always_promise() {
        let ps = assess(&no_namespaces(), Facts::default());
        assert!(unheld_always(&ps).is_empty(), "{ps:?}");
        assert_eq!(held(&ps, "no_network"), vec!["seccomp", "landlock_tcp"]);
        assert_eq!(held(&ps, "nothing_outlives"), vec!["subreaper"]);
        assert_eq!(held(&ps, "processes_bounded"), vec!["rlimits"]);
        let l = line(&ps, true);
        assert!(
            l.ends_with(
                "; not held here: nothing_outlives_server, kernel_memory_bounded, tmpdir_bounded, \
                 host_hidden, protected_hidden, draft_confined"
            ),
            "{l}"
        );
    }

    #[test]
    fn root_without_pid_max_or_a_cgroup_has_no_process_bound() {
        let l = {
            let mut l = no_namespaces();
            l.set_pid_max(None);
            l
        };
        let ps = assess(
            &l,
            Facts {
                root: true,
                ..Facts::default()
            },
        );
        let unheld = unheld_always(&ps);
        assert_eq!(unheld.len(), 1, "{unheld:?}");
        assert!(unheld[0].starts_with("a run's processes bounded (needs for a server run as root"));
        // A cgroup holds it for root.
        let ps = assess(
            &l.with(Layer::Cgroup),
            Facts {
                root: true,
                ..Facts::default()
            },
        );
        assert_eq!(held(&ps, "processes_bounded"), vec!["cgroup"]);
    }

    #[test]
    fn the_network_needs_seccomp_or_a_namespace_landlock_tcp_is_not_enough() {
        let l = no_namespaces().without(Layer::Seccomp);
        let ps = assess(&l, Facts::default());
        assert!(held(&ps, "no_network").is_empty());
        assert_eq!(unheld_always(&ps).len(), 1);
        let l = no_namespaces().without(Layer::Seccomp).with(Layer::Netns);
        assert_eq!(
            held(&assess(&l, Facts::default()), "no_network"),
            vec!["netns", "landlock_tcp"]
        );
    }

    #[test]
    fn files_need_landlock_or_the_mount_layer() {
        let l = {
            let mut l = no_namespaces()
                .without(Layer::LandlockTcp)
                .without(Layer::LandlockScope);
            l.set_landlock_abi(None);
            l
        };
        let ps = assess(&l, Facts::default());
        let unheld = unheld_always(&ps);
        assert_eq!(unheld.len(), 2, "{unheld:?}");
        let l = {
            let mut l = full();
            l.set_landlock_abi(None);
            l
        };
        assert_eq!(
            held(&assess(&l, Facts::default()), "reads_confined"),
            vec!["mountns"]
        );
    }

    #[test]
    fn below_landlock_abi_3_writes_rest_on_landlock_with_seccomp() {
        let alone = Facts {
            db_alone: true,
            ..Facts::default()
        };
        let abi = |l: Layers, abi: i32| {
            let mut l = l;
            l.set_landlock_abi(Some(abi));
            l
        };
        // ABI 3 has the truncate right: Landlock alone.
        let ps = assess(&abi(no_namespaces(), 3), alone);
        assert_eq!(held(&ps, "writes_confined"), vec!["landlock"]);
        assert_eq!(held(&ps, "draft_confined"), vec!["landlock"]);
        // ABI 2: seccomp refuses truncate(2) by path beside it.
        let ps = assess(&abi(no_namespaces(), 2), alone);
        assert_eq!(held(&ps, "writes_confined"), vec!["landlock", "seccomp"]);
        assert_eq!(held(&ps, "draft_confined"), vec!["landlock", "seccomp"]);
        assert_eq!(held(&ps, "reads_confined"), vec!["landlock"]);
        assert_eq!(
            held(&assess(&abi(full(), 2), alone), "writes_confined"),
            vec!["mountns", "landlock", "seccomp"]
        );
        // ABI 2 without seccomp: Landlock can't hold writes; without the
        // mount layer nothing does, and a draft is withheld.
        let ps = assess(&abi(no_namespaces(), 2).without(Layer::Seccomp), alone);
        assert!(held(&ps, "writes_confined").is_empty());
        assert!(held(&ps, "draft_confined").is_empty());
        assert_eq!(held(&ps, "reads_confined"), vec!["landlock"]);
        assert_eq!(
            held(
                &assess(&abi(full(), 2).without(Layer::Seccomp), alone),
                "writes_confined"
            ),
            vec!["mountns"]
        );
    }

    #[test]
    fn a_draft_without_the_mount_layer_needs_the_database_alone_and_landlock() {
        let ps = assess(&no_namespaces(), Facts::default());
        assert!(held(&ps, "draft_confined").is_empty());
        let alone = Facts {
            db_alone: true,
            ..Facts::default()
        };
        assert_eq!(
            held(&assess(&no_namespaces(), alone), "draft_confined"),
            vec!["landlock"]
        );
        let no_ll = {
            let mut l = no_namespaces();
            l.set_landlock_abi(None);
            l
        };
        assert!(held(&assess(&no_ll, alone), "draft_confined").is_empty());
        // The mount layer holds it whatever the folder holds.
        assert_eq!(
            held(&assess(&full(), Facts::default()), "draft_confined"),
            vec!["mountns"]
        );
    }
}
