//! cgroup v2 ids → cgroup paths → container, pod and systemd unit identities.
//!
//! The recorder stores the cgroup v2 id of each I/O's submitter (or, for writeback, of the
//! cgroup its pages are charged to): the kernfs node id of the cgroup, which on 64-bit
//! kernels is the inode number of the cgroup's directory under the cgroup2 mount. A
//! [`Resolver`] walks that mount to map ids to paths, and [`identify`] reads container and
//! pod identities out of the path the way container runtimes name their cgroups:
//!
//! | runtime | systemd cgroup driver | cgroupfs driver |
//! |---|---|---|
//! | docker | `docker-<id>.scope` | `/docker/<id>` |
//! | containerd (CRI, nerdctl) | `cri-containerd-<id>.scope`, `nerdctl-<id>.scope` | `/kubepods/…/pod<uid>/<id>` |
//! | CRI-O | `crio-<id>.scope` (`crio-conmon-<id>.scope` is its monitor) | `/kubepods/…/pod<uid>/crio-<id>` |
//! | podman | `libpod-<id>.scope` (`libpod-conmon-<id>.scope`: the monitor) | `/libpod_parent/libpod-<id>` |
//! | Kubernetes pods | `kubepods-<qos>-pod<uid_with_underscores>.slice` | `/kubepods/<qos>/pod<uid>` |
//! | LXC | `lxc.payload.<name>` | |
//!
//! and any other `*.service` or `*.scope` component is a systemd unit (the innermost one is
//! kept: `nginx.service`, `session-3.scope`, `user@1000.service`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iodump_format::inthash::IntMap;

pub use iodump_format::cgroup::{Cgroup as CgroupInfo, Identity, Runtime};

fn is_hex_id(s: &str) -> bool {
    s.len() >= 12 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A pod UID as the kubelet writes it in a cgroup name: 36 characters, dashes (cgroupfs) or
/// underscores (systemd, where `-` separates the slice hierarchy); returned with dashes.
fn pod_uid(s: &str) -> Option<String> {
    let u = s.replace('_', "-");
    let ok = u.len() == 36
        && u.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    ok.then(|| u.to_ascii_lowercase())
}

/// A container scope's id: `<prefix><id>.scope`, or `<prefix><id>` for the cgroupfs driver.
fn scoped_id<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = name.strip_prefix(prefix)?;
    let id = rest.strip_suffix(".scope").unwrap_or(rest);
    is_hex_id(id).then_some(id)
}

/// Reads a cgroup path (`/kubepods.slice/…/cri-containerd-<id>.scope`, relative to the
/// cgroup2 mount) for container, pod and unit identities (see the module's table).
pub fn identify(path: &str) -> Identity {
    let mut id = Identity::default();
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let in_kubepods = parts
        .iter()
        .any(|p| *p == "kubepods" || p.starts_with("kubepods"));
    for (i, &c) in parts.iter().enumerate() {
        let parent = if i > 0 { parts[i - 1] } else { "" };
        // Kubernetes pods: systemd driver `kubepods-burstable-pod<uid>.slice`, `kubepods-pod<uid>.slice`.
        if let Some(slice) = c
            .strip_prefix("kubepods")
            .and_then(|s| s.strip_suffix(".slice"))
        {
            for qos in ["guaranteed", "burstable", "besteffort"] {
                if slice.starts_with(&format!("-{qos}")) {
                    id.qos = Some(qos.to_string());
                }
            }
            if let Some(pos) = slice.rfind("-pod") {
                if let Some(u) = pod_uid(&slice[pos + 4..]) {
                    id.pod_uid = Some(u);
                }
            }
            continue;
        }
        // cgroupfs driver: `/kubepods/<qos>/pod<uid>/<container>`.
        if in_kubepods {
            if let Some(u) = c.strip_prefix("pod").and_then(pod_uid) {
                id.pod_uid = Some(u);
                continue;
            }
            if ["guaranteed", "burstable", "besteffort"].contains(&c) && parent == "kubepods" {
                id.qos = Some(c.to_string());
                continue;
            }
        }
        let container = [
            ("docker-", Runtime::Docker, false),
            ("cri-containerd-", Runtime::Containerd, false),
            ("nerdctl-", Runtime::Containerd, false),
            ("crio-conmon-", Runtime::CriO, true),
            ("crio-", Runtime::CriO, false),
            ("libpod-conmon-", Runtime::Podman, true),
            ("libpod-", Runtime::Podman, false),
        ]
        .iter()
        .find_map(|&(prefix, rt, monitor)| scoped_id(c, prefix).map(|x| (x, rt, monitor)));
        if let Some((cid, rt, monitor)) = container {
            id.runtime = Some(rt);
            id.container_id = Some(cid.to_ascii_lowercase());
            id.monitor = monitor;
            continue;
        }
        if let Some(name) = c.strip_prefix("lxc.payload.") {
            id.runtime = Some(Runtime::Lxc);
            id.container_id = Some(name.to_string());
            id.monitor = false;
            continue;
        }
        if is_hex_id(c) && c.len() == 64 {
            // cgroupfs driver: docker's `/docker/<id>`, a pod's `/kubepods/…/pod<uid>/<id>`.
            let rt = if parent == "docker" {
                Runtime::Docker
            } else {
                Runtime::Cri
            };
            id.runtime = Some(rt);
            id.container_id = Some(c.to_ascii_lowercase());
            id.monitor = false;
            continue;
        }
        if c.ends_with(".service") || c.ends_with(".scope") {
            id.unit = Some(c.to_string());
        }
    }
    id
}

/// The cgroup2 mount point from /proc/self/mountinfo (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on a hybrid hierarchy).
pub fn cgroup2_mount() -> Option<PathBuf> {
    iodump_host::mounts::read()
        .into_iter()
        .find(|m| m.fstype == "cgroup2")
        .map(|m| PathBuf::from(String::from_utf8_lossy(&m.mount_point).into_owned()))
}

/// How long after a walk of the cgroup tree an unknown id waits before it starts another.
pub const RESCAN_AFTER: Duration = Duration::from_secs(1);

/// cgroup ids → [`CgroupInfo`]: walks the cgroup2 mount when it meets an id it does not
/// know (at most once per [`RESCAN_AFTER`]); ids once resolved stay known after their cgroup
/// is removed.
pub struct Resolver {
    root: Option<PathBuf>,
    by_id: IntMap<u64, CgroupInfo>,
    last_scan: Option<Instant>,
    /// Walks done so far.
    pub scans: u64,
}

impl Resolver {
    /// A resolver of the system's cgroup2 mount (none found: nothing resolves).
    pub fn new() -> Resolver {
        Resolver::with_root(cgroup2_mount())
    }

    /// A resolver of the cgroup2 tree mounted at `root`.
    pub fn with_root(root: Option<PathBuf>) -> Resolver {
        Resolver {
            root,
            by_id: IntMap::default(),
            last_scan: None,
            scans: 0,
        }
    }

    /// The cgroup2 mount walked.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// The cgroup of an id, walking the tree again if it is unknown and the last walk is
    /// older than [`RESCAN_AFTER`].
    pub fn get(&mut self, id: u64) -> Option<&CgroupInfo> {
        if !self.by_id.contains_key(&id)
            && self.last_scan.is_none_or(|t| t.elapsed() >= RESCAN_AFTER)
        {
            self.scan();
        }
        self.by_id.get(&id)
    }

    /// The cgroup of an id if already known (no walk).
    pub fn known(&self, id: u64) -> Option<&CgroupInfo> {
        self.by_id.get(&id)
    }

    /// Walks the whole cgroup2 tree now, adding every cgroup found (a cgroup whose id is
    /// known under another path, moved, gets its new path).
    pub fn scan(&mut self) {
        self.last_scan = Some(Instant::now());
        self.scans += 1;
        let Some(root) = self.root.clone() else {
            return;
        };
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata(&root) {
            self.add(m.ino(), "/".to_string());
        }
        let mut stack: Vec<(PathBuf, String)> = vec![(root, String::new())];
        while let Some((dir, rel)) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for ent in rd.flatten() {
                use std::os::unix::fs::DirEntryExt;
                if !ent.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = ent.file_name().to_string_lossy().into_owned();
                let path = format!("{rel}/{name}");
                self.add(ent.ino(), path.clone());
                stack.push((ent.path(), path));
            }
        }
    }

    /// The outermost known cgroups of the container or pod `prefix` names (see
    /// [`Identity::matches_container`]): a container's scope (not the cgroups its payload
    /// made inside it), a pod's slice. Sorted by path.
    pub fn outermost_matching(&self, prefix: &str) -> Vec<&CgroupInfo> {
        let matched: Vec<&CgroupInfo> = self
            .by_id
            .values()
            .filter(|c| c.identity.matches_container(prefix))
            .collect();
        let mut out: Vec<&CgroupInfo> = matched
            .iter()
            .copied()
            .filter(|c| {
                !matched
                    .iter()
                    .any(|o| o.id != c.id && o.path != "/" && c.is_under(&o.path))
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out.dedup_by(|a, b| a.path == b.path);
        out
    }

    fn add(&mut self, id: u64, path: String) {
        if self.by_id.get(&id).is_some_and(|c| c.path == path) {
            return;
        }
        let identity = identify(&path);
        self.by_id.insert(id, CgroupInfo { id, path, identity });
    }
}

impl Default for Resolver {
    fn default() -> Self {
        Resolver::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f1e9c0d3b2a41d8a7c6e5f4d3c2b1a00f1e2d3c4b5a69788796a5b4c3d2e1f0";

    #[test]
    fn docker_podman_crio_containerd_scopes() {
        let i = identify(&format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(i.runtime, Some(Runtime::Docker));
        assert_eq!(i.container_id.as_deref(), Some(ID));
        assert_eq!(i.unit, None);
        assert_eq!(i.label(), "docker:4f1e9c0d3b2a");
        let i = identify(&format!("/docker/{ID}"));
        assert_eq!(i.runtime, Some(Runtime::Docker));
        let i = identify(&format!("/machine.slice/libpod-{ID}.scope/container"));
        assert_eq!(i.runtime, Some(Runtime::Podman));
        assert_eq!(i.container_id.as_deref(), Some(ID));
        let i = identify(&format!("/machine.slice/libpod-conmon-{ID}.scope"));
        assert!(i.monitor);
        assert_eq!(i.label(), "podman:4f1e9c0d3b2a(conmon)");
        let i = identify(&format!("/system.slice/crio-{ID}.scope"));
        assert_eq!(i.runtime, Some(Runtime::CriO));
        let i = identify(&format!(
            "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope"
        ));
        assert_eq!(i.runtime, Some(Runtime::Podman));
        assert_eq!(i.unit.as_deref(), Some("user@1000.service"));
        let i = identify("/lxc.payload.web1");
        assert_eq!(i.label(), "lxc:web1");
    }

    #[test]
    fn kubernetes_pods_both_drivers() {
        let uid = "1a2b3c4d-5e6f-4a0b-9c8d-7e6f5a4b3c2d";
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{ID}.scope",
            uid.replace('-', "_")
        );
        let i = identify(&systemd);
        assert_eq!(i.runtime, Some(Runtime::Containerd));
        assert_eq!(i.container_id.as_deref(), Some(ID));
        assert_eq!(i.pod_uid.as_deref(), Some(uid));
        assert_eq!(i.qos.as_deref(), Some("burstable"));
        assert_eq!(i.label(), "containerd:4f1e9c0d3b2a pod:1a2b3c4d");
        // Guaranteed pods sit right under kubepods.slice.
        let i = identify(&format!(
            "/kubepods.slice/kubepods-pod{}.slice/crio-{ID}.scope",
            uid.replace('-', "_")
        ));
        assert_eq!(i.pod_uid.as_deref(), Some(uid));
        assert_eq!(i.runtime, Some(Runtime::CriO));
        // The pod's own slice (its pause container's parent): pod only.
        let i = identify(&format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice",
            uid.replace('-', "_")
        ));
        assert_eq!(i.pod_uid.as_deref(), Some(uid));
        assert_eq!(i.qos.as_deref(), Some("besteffort"));
        assert_eq!(i.container_id, None);
        assert_eq!(i.label(), "pod:1a2b3c4d");
        // cgroupfs driver.
        let i = identify(&format!("/kubepods/besteffort/pod{uid}/{ID}"));
        assert_eq!(i.pod_uid.as_deref(), Some(uid));
        assert_eq!(i.runtime, Some(Runtime::Cri));
        assert_eq!(i.qos.as_deref(), Some("besteffort"));
        let i = identify(&format!("/kubepods/pod{uid}/crio-{ID}"));
        assert_eq!(i.runtime, Some(Runtime::CriO));
        assert_eq!(i.pod_uid.as_deref(), Some(uid));
    }

    #[test]
    fn systemd_units_and_plain_paths() {
        let i = identify("/system.slice/nginx.service");
        assert_eq!(i.unit.as_deref(), Some("nginx.service"));
        assert_eq!(i.label(), "nginx.service");
        let i = identify("/user.slice/user-1000.slice/session-3.scope");
        assert_eq!(i.label(), "session-3.scope");
        assert_eq!(identify("/").label(), "-");
        assert_eq!(identify("/my/group").label(), "-");
        // Not container ids: too short, not hex.
        assert_eq!(identify("/system.slice/docker-xyz.scope").runtime, None);
        assert_eq!(
            identify("/system.slice/docker-xyz.scope").unit.as_deref(),
            Some("docker-xyz.scope")
        );
        assert_eq!(identify("/system.slice/docker.service").runtime, None);
        // A pod-like name outside kubepods is not a pod.
        assert_eq!(
            identify("/pod1a2b3c4d-5e6f-4a0b-9c8d-7e6f5a4b3c2d").pod_uid,
            None
        );
    }

    #[test]
    fn container_prefix_filter() {
        let uid = "1a2b3c4d-5e6f-4a0b-9c8d-7e6f5a4b3c2d";
        let i = identify(&format!("/kubepods/pod{uid}/crio-{ID}"));
        assert!(i.matches_container("4f1e9c"));
        assert!(i.matches_container("4F1E9C"));
        assert!(i.matches_container("crio:4f1e"));
        assert!(!i.matches_container("docker:4f1e"));
        assert!(i.matches_container("pod:1a2b"));
        assert!(i.matches_container("1a2b3c4d"));
        assert!(!i.matches_container("pod:4f1e"));
        assert!(!i.matches_container("5f"));
        assert!(!identify("/system.slice/nginx.service").matches_container("4f"));
        assert!(
            !identify(&format!("/machine.slice/libpod-conmon-{ID}.scope"))
                .matches_container("4f1e")
        );
    }

    #[test]
    fn resolver_walks_a_tree() {
        // Any directory tree stands in for the cgroup2 mount: ids are inode numbers.
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("iodump-cgroups-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let leaf = dir.join(format!("system.slice/docker-{ID}.scope"));
        std::fs::create_dir_all(&leaf).unwrap();
        let mut r = Resolver::with_root(Some(dir.clone()));
        let ino = std::fs::metadata(&leaf).unwrap().ino();
        let c = r.get(ino).unwrap().clone();
        assert_eq!(c.path, format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(c.identity.runtime, Some(Runtime::Docker));
        assert_eq!(
            r.get(std::fs::metadata(&dir).unwrap().ino()).unwrap().path,
            "/"
        );
        assert_eq!(r.scans, 1);
        // An unknown id walks again only once RESCAN_AFTER has passed.
        let later = dir.join("later.service");
        std::fs::create_dir(&later).unwrap();
        let ino2 = std::fs::metadata(&later).unwrap().ino();
        r.last_scan = Some(Instant::now());
        assert!(r.get(ino2).is_none());
        assert_eq!(r.scans, 1);
        r.last_scan = Some(Instant::now() - RESCAN_AFTER);
        assert_eq!(r.get(ino2).unwrap().path, "/later.service");
        // Container lookup: the scope, not what the container made inside it.
        let inner = leaf.join("init.scope");
        std::fs::create_dir(&inner).unwrap();
        r.scan();
        let m = r.outermost_matching("4f1e9c");
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].path, format!("/system.slice/docker-{ID}.scope"));
        assert!(r.outermost_matching("5f").is_empty());
        std::fs::remove_dir(&inner).unwrap();
        // Removed cgroups stay known.
        std::fs::remove_dir_all(&dir).unwrap();
        r.scan();
        assert_eq!(r.known(ino).unwrap().path, c.path);
    }
}
