//! The cgroups table (since format 1.2): what a cgroup v2 id of an event or a process stood
//! for when it was recorded — the cgroup's path under the cgroup2 mount and the container,
//! Kubernetes pod and systemd unit read out of it by the recorder.
//!
//! How a recorder reads identities out of cgroup names is the recorder's business (iodump's
//! is `iodump_record::cgroups::identify`); this module only holds what it found, and answers
//! the questions readers ask of it: a short label, and whether a cgroup belongs to a given
//! container or pod, or lies under a given cgroup path.

/// The container runtime a cgroup name belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Runtime {
    /// Docker (moby).
    Docker,
    /// containerd: its CRI plugin (Kubernetes) or nerdctl.
    Containerd,
    /// CRI-O.
    CriO,
    /// Podman (libpod).
    Podman,
    /// LXC / Incus / LXD.
    Lxc,
    /// A Kubernetes container whose runtime the cgroupfs driver's name does not tell.
    Cri,
}

impl Runtime {
    /// Every runtime, in code order (code = index + 1).
    pub const ALL: [Runtime; 6] = [
        Runtime::Docker,
        Runtime::Containerd,
        Runtime::CriO,
        Runtime::Podman,
        Runtime::Lxc,
        Runtime::Cri,
    ];

    /// A short lower-case name: docker, containerd, crio, podman, lxc, cri.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Docker => "docker",
            Runtime::Containerd => "containerd",
            Runtime::CriO => "crio",
            Runtime::Podman => "podman",
            Runtime::Lxc => "lxc",
            Runtime::Cri => "cri",
        }
    }

    /// The stored code (schemas/iod-format.md §3.8): 1 to 6.
    pub fn code(self) -> u8 {
        Runtime::ALL.iter().position(|r| *r == self).unwrap_or(0) as u8 + 1
    }

    /// The runtime of a stored code; 0 and codes this version does not know are `None`.
    pub fn from_code(c: u8) -> Option<Runtime> {
        Runtime::ALL.get((c as usize).checked_sub(1)?).copied()
    }
}

/// What a cgroup path says about who runs in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// The container runtime, when a component is a container's cgroup.
    pub runtime: Option<Runtime>,
    /// The container id (hex, as the runtime prints it; the LXC container's name).
    pub container_id: Option<String>,
    /// True for a runtime's monitor process (conmon) beside the container, not in it.
    pub monitor: bool,
    /// The Kubernetes pod UID (with dashes, as `kubectl get pod -o jsonpath={.metadata.uid}`).
    pub pod_uid: Option<String>,
    /// The Kubernetes QoS class of the pod: guaranteed, burstable or besteffort.
    pub qos: Option<String>,
    /// The innermost systemd unit that is not a container scope (`nginx.service`).
    pub unit: Option<String>,
}

impl Identity {
    /// A short label: `docker:0123456789ab`, `containerd:0123456789ab pod:1a2b3c4d`, the
    /// unit, or `-`.
    pub fn label(&self) -> String {
        let mut s = String::new();
        if let (Some(rt), Some(id)) = (self.runtime, &self.container_id) {
            let short: String = id.chars().take(12).collect();
            s = format!("{}:{short}", rt.name());
            if self.monitor {
                s.push_str("(conmon)");
            }
        }
        if let Some(uid) = &self.pod_uid {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str("pod:");
            s.extend(uid.chars().take(8));
        }
        if s.is_empty() {
            if let Some(u) = &self.unit {
                s = u.clone();
            }
        }
        if s.is_empty() {
            s.push('-');
        }
        s
    }

    /// The container id of a cgroup in a container (not its runtime's monitor).
    pub fn container(&self) -> Option<&str> {
        self.container_id.as_deref().filter(|_| !self.monitor)
    }

    /// True when the container id or the pod UID starts with `prefix` (case-insensitive;
    /// `runtime:prefix` also checks the runtime and takes monitors too, `pod:prefix` checks
    /// only the pod UID). A bare prefix never matches a runtime's monitor (conmon), which
    /// runs beside the container, not in it.
    pub fn matches_container(&self, prefix: &str) -> bool {
        let prefix = prefix.trim().to_ascii_lowercase();
        if let Some(p) = prefix.strip_prefix("pod:") {
            return self.pod_uid.as_deref().is_some_and(|u| u.starts_with(p));
        }
        if let Some((rt, p)) = prefix.split_once(':') {
            return self.runtime.is_some_and(|r| r.name() == rt)
                && self
                    .container_id
                    .as_deref()
                    .is_some_and(|c| c.to_ascii_lowercase().starts_with(p));
        }
        if prefix.is_empty() {
            return self.container_id.is_some();
        }
        self.container()
            .is_some_and(|c| c.to_ascii_lowercase().starts_with(&prefix))
            || self
                .pod_uid
                .as_deref()
                .is_some_and(|u| u.starts_with(&prefix))
    }
}

/// A cgroups table entry: one cgroup v2 id, its path and who runs in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroup {
    /// The cgroup v2 id (kernfs node id; on 64-bit kernels the inode number of the cgroup's
    /// directory), as events and process entries carry it.
    pub id: u64,
    /// Its path under the cgroup2 mount, from `/` (the root cgroup is `/`).
    pub path: String,
    /// Who runs in it.
    pub identity: Identity,
}

impl Cgroup {
    /// True when this cgroup is `path` or lies below it. `path` is a cgroup path from the
    /// cgroup2 mount (`/system.slice/nginx.service`) or a directory under a mount at
    /// `/sys/fs/cgroup` (or its `unified` hybrid mount); a trailing `/` is ignored.
    pub fn is_under(&self, path: &str) -> bool {
        let want = cgroup_path_arg(path);
        if want == "/" {
            return true;
        }
        self.path == want
            || self
                .path
                .strip_prefix(want)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// A cgroup path as a user gives it, as a path from the cgroup2 mount: the usual mount
/// points (`/sys/fs/cgroup/unified`, `/sys/fs/cgroup`) and a trailing `/` are cut off.
pub fn cgroup_path_arg(path: &str) -> &str {
    let mut p = path.trim();
    for mount in ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
        if let Some(rest) = p.strip_prefix(mount) {
            if rest.is_empty() || rest.starts_with('/') {
                p = rest;
                break;
            }
        }
    }
    let p = p.trim_end_matches('/');
    if p.is_empty() {
        "/"
    } else {
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cg(path: &str, identity: Identity) -> Cgroup {
        Cgroup {
            id: 7,
            path: path.into(),
            identity,
        }
    }

    #[test]
    fn runtime_codes_round_trip_and_unknown_codes_read_as_none() {
        for r in Runtime::ALL {
            assert_eq!(Runtime::from_code(r.code()), Some(r));
        }
        assert_eq!(Runtime::Docker.code(), 1);
        assert_eq!(Runtime::Cri.code(), 6);
        assert_eq!(Runtime::from_code(0), None);
        assert_eq!(Runtime::from_code(7), None);
    }

    #[test]
    fn paths_below_a_cgroup() {
        let c = cg("/system.slice/nginx.service", Identity::default());
        assert!(c.is_under("/system.slice"));
        assert!(c.is_under("/system.slice/"));
        assert!(c.is_under("/sys/fs/cgroup/system.slice/nginx.service"));
        assert!(c.is_under("/sys/fs/cgroup/unified/system.slice"));
        assert!(c.is_under("/"));
        assert!(c.is_under("/sys/fs/cgroup"));
        assert!(!c.is_under("/system.slice/nginx"));
        assert!(!c.is_under("/system"));
        assert!(!c.is_under("/user.slice"));
        assert_eq!(cgroup_path_arg("/sys/fs/cgroupx/a"), "/sys/fs/cgroupx/a");
    }

    #[test]
    fn containers_match_by_prefix_but_monitors_only_by_runtime() {
        let id = Identity {
            runtime: Some(Runtime::Podman),
            container_id: Some("0123456789abcdef".into()),
            monitor: false,
            pod_uid: Some("1a2b3c4d-0000-1111-2222-333344445555".into()),
            ..Identity::default()
        };
        assert!(id.matches_container("0123"));
        assert!(id.matches_container("0123456789ABC"));
        assert!(id.matches_container("podman:0123"));
        assert!(!id.matches_container("docker:0123"));
        assert!(id.matches_container("pod:1a2b"));
        assert!(id.matches_container("1a2b"));
        assert!(!id.matches_container("pod:0123"));
        assert!(!id.matches_container("fff"));
        let conmon = Identity {
            monitor: true,
            pod_uid: None,
            ..id.clone()
        };
        assert!(!conmon.matches_container("0123"));
        assert!(conmon.matches_container("podman:0123"));
        assert_eq!(conmon.container(), None);
        assert_eq!(id.container(), Some("0123456789abcdef"));
        assert_eq!(id.label(), "podman:0123456789ab pod:1a2b3c4d");
        assert_eq!(conmon.label(), "podman:0123456789ab(conmon)");
        assert_eq!(Identity::default().label(), "-");
    }
}
