//! `iodump-output` owns how iodump creates the files it writes (traces, exports, reports,
//! plots, Parquet tables), by one rule:
//!
//! - a symbolic link at the output path is never followed: it is refused;
//! - a file another user owns is never written into nor replaced: it is refused, and so is
//!   anything but a regular file (a directory, a device, a FIFO);
//! - the new file is always private: mode 0600, owned by whoever runs iodump;
//! - an existing file is replaced only once the new one is worth keeping: the new file is a
//!   temporary file beside it (created with `O_CREAT | O_EXCL`, so never through a link), and
//!   [`OutputFile::commit`] renames it over the path; dropped uncommitted, the temporary file
//!   is removed and the existing file is left as it was.
//!
//! A process killed before it commits leaves the existing file as it was and its temporary
//! file (`.iodump-XXXXXXXXXXXXXXXX-NAME`, hidden) beside it.
//!
//! [`parts`] writes a trace as a sequence of files in a directory by the same rule (rotation
//! and retention), the only part of this crate that knows the trace format (`iodump-format`,
//! its one iodump dependency). The recorder, the analysis crate and the binary use it alike.

use std::ffi::OsString;
use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

pub mod parts;

/// Why an output could not be created or kept.
#[derive(Debug)]
#[non_exhaustive]
pub enum OutputError {
    /// The path names no file (empty, or ending in `/` or `..`).
    NoFileName {
        /// The path given.
        path: PathBuf,
    },
    /// The path is a symbolic link: outputs never follow links.
    Symlink {
        /// The path given.
        path: PathBuf,
    },
    /// The path exists and is not what the output must be.
    WrongKind {
        /// The path given.
        path: PathBuf,
        /// What it is (`a directory`, `a block device`…).
        found: &'static str,
        /// What it should be (`a regular file`, `a directory`).
        wanted: &'static str,
    },
    /// The path exists and belongs to another user.
    OtherOwner {
        /// The path given.
        path: PathBuf,
        /// Its owner.
        uid: u32,
    },
    /// The path is one of the files the command reads (a trace, a part of a recording, a
    /// Parquet file of a dataset): writing it would destroy the input.
    IsInput {
        /// The path given.
        path: PathBuf,
        /// The input it is (as the user named it: the file, or the directory holding it).
        input: PathBuf,
        /// `input` is a directory that holds it.
        in_dir: bool,
    },
    /// A system call failed.
    Io {
        /// The path given.
        path: PathBuf,
        /// What was being done.
        what: String,
        /// What the kernel said.
        source: io::Error,
    },
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputError::NoFileName { path } => {
                write!(f, "{}: not a file name", path.display())
            }
            OutputError::Symlink { path } => write!(
                f,
                "refusing to write {}: it is a symbolic link (outputs never follow links: give \
                 the real path, or remove the link)",
                path.display()
            ),
            OutputError::WrongKind {
                path,
                found,
                wanted,
            } => write!(
                f,
                "refusing to write {}: it is {found}, not {wanted}",
                path.display()
            ),
            OutputError::OtherOwner { path, uid } => write!(
                f,
                "refusing to write {}: it belongs to another user (uid {uid}): remove it or \
                 choose another name",
                path.display()
            ),
            OutputError::IsInput {
                path,
                input,
                in_dir,
            } => {
                write!(
                    f,
                    "refusing to write {}: it is an input of this command",
                    path.display()
                )?;
                match (in_dir, path == input) {
                    (true, _) => write!(f, " (in {})", input.display()),
                    (false, false) => write!(f, " ({})", input.display()),
                    (false, true) => Ok(()),
                }
            }
            OutputError::Io { path, what, .. } => {
                write!(f, "cannot create {}: {what}", path.display())
            }
        }
    }
}

impl std::error::Error for OutputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OutputError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io_err(path: &Path, what: impl Into<String>) -> impl FnOnce(io::Error) -> OutputError + '_ {
    let what = what.into();
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// The effective user id of this process.
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// What a file type is, in words.
fn kind_name(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "a regular file"
    }
}

/// What is at `path` without following a link there: `None` when nothing is.
fn lstat(path: &Path) -> Result<Option<Metadata>, OutputError> {
    // Without its trailing slashes: the kernel resolves a link named `link/` (the slash
    // names what it points to), so `lstat` would say what the link points to.
    let b = path.as_os_str().as_bytes();
    let end = b
        .iter()
        .rposition(|&c| c != b'/')
        .map_or(b.len(), |i| i + 1);
    match std::fs::symlink_metadata(Path::new(std::ffi::OsStr::from_bytes(&b[..end]))) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path, "cannot inspect it")(e)),
    }
}

/// How deep [`check_not_input`] looks into an input directory (a Parquet dataset partitioned
/// by host and date keeps its files three levels down).
const INPUT_DEPTH: usize = 6;

/// Refuses `out` when what is there now is one of the files `inputs` name: an input file
/// itself (by device and inode, so another name of it, a hard link or `./x` for `x`, is
/// caught), or a trace or Parquet file (`*.iod`, `*.parquet`) within an input directory,
/// which is what a recording's or a dataset's reader reads. Other files in an input directory
/// (a report written beside the parts) may be written. Nothing there: `Ok`.
pub fn check_not_input(out: &Path, inputs: &[PathBuf]) -> Result<(), OutputError> {
    let Ok(m) = std::fs::metadata(out) else {
        return Ok(());
    };
    let id = (m.dev(), m.ino());
    let is_input = |input: &Path, in_dir| OutputError::IsInput {
        path: out.to_path_buf(),
        input: input.to_path_buf(),
        in_dir,
    };
    for input in inputs {
        let Ok(im) = std::fs::metadata(input) else {
            continue;
        };
        if (im.dev(), im.ino()) == id {
            return Err(is_input(input, false));
        }
        if im.is_dir() && m.is_file() && holds(input, id, INPUT_DEPTH) {
            return Err(is_input(input, true));
        }
    }
    Ok(())
}

/// True when directory `dir` holds, within `depth` levels (links not followed), a `*.iod` or
/// `*.parquet` file that is `id` (device, inode).
fn holds(dir: &Path, id: (u64, u64), depth: usize) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for e in entries.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let name = e.file_name();
        let name = name.as_bytes();
        if ft.is_file() && (name.ends_with(b".iod") || name.ends_with(b".parquet")) {
            if e.metadata().is_ok_and(|m| (m.dev(), m.ino()) == id) {
                return true;
            }
        } else if ft.is_dir() && depth > 1 && holds(&e.path(), id, depth - 1) {
            return true;
        }
    }
    false
}

/// Checks that `path` may be written as an output file: nothing is there, or a regular file
/// this user owns (returned: it would be replaced). A symbolic link, anything but a regular
/// file, or a file of another user is refused.
pub fn check(path: &Path) -> Result<Option<Metadata>, OutputError> {
    let Some(m) = lstat(path)? else {
        return Ok(None);
    };
    check_existing(path, &m, true)?;
    Ok(Some(m))
}

/// Checks that `path` may be used as an output directory: nothing is there (it will be
/// created), or a directory this user owns. A symbolic link, anything but a directory, or a
/// directory of another user is refused.
pub fn check_dir(path: &Path) -> Result<(), OutputError> {
    match lstat(path)? {
        None => Ok(()),
        Some(m) => check_existing(path, &m, false),
    }
}

fn check_existing(path: &Path, m: &Metadata, file: bool) -> Result<(), OutputError> {
    let ft = m.file_type();
    if ft.is_symlink() {
        return Err(OutputError::Symlink {
            path: path.to_path_buf(),
        });
    }
    let (ok, wanted) = if file {
        (ft.is_file(), "a regular file")
    } else {
        (ft.is_dir(), "a directory")
    };
    if !ok {
        return Err(OutputError::WrongKind {
            path: path.to_path_buf(),
            found: kind_name(ft),
            wanted,
        });
    }
    if m.uid() != euid() {
        return Err(OutputError::OtherOwner {
            path: path.to_path_buf(),
            uid: m.uid(),
        });
    }
    Ok(())
}

/// The directory and file name of an output path.
fn split(path: &Path) -> Result<(PathBuf, OsString), OutputError> {
    let no_name = || OutputError::NoFileName {
        path: path.to_path_buf(),
    };
    // `Path::file_name` ignores a trailing slash; a trailing slash names a directory.
    if path.as_os_str().as_bytes().ends_with(b"/") {
        return Err(no_name());
    }
    let name = path.file_name().ok_or_else(no_name)?.to_os_string();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

/// A random 64-bit number (from the standard library's randomly seeded hasher).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// The name of a temporary file for `name`: hidden, unique, and ending in `name` (so its
/// extension is kept for writers that choose a format from it), at most 255 bytes.
fn temp_name(name: &OsString) -> OsString {
    let b = name.as_bytes();
    let tail = &b[b.len().saturating_sub(200)..];
    let mut v = format!(".iodump-{:016x}-", random_u64()).into_bytes();
    v.extend_from_slice(tail);
    OsString::from_vec(v)
}

/// An output file being written: a private temporary file beside its path until
/// [`commit`](OutputFile::commit) renames it over the path. Dropped uncommitted, the
/// temporary file is removed.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    dir: PathBuf,
    temp: Option<PathBuf>,
    file: File,
}

impl OutputFile {
    /// Checks `path` (see [`check`]) and creates the temporary file beside it: mode 0600,
    /// `O_CREAT | O_EXCL | O_NOFOLLOW`, open for reading and writing. Nothing at `path` is
    /// touched.
    pub fn create(path: &Path) -> Result<OutputFile, OutputError> {
        let (dir, name) = split(path)?;
        check(path)?;
        let mut tries = 0;
        let (temp, file) = loop {
            let temp = dir.join(temp_name(&name));
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&temp)
            {
                Ok(f) => break (temp, f),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 100 => tries += 1,
                Err(e) => {
                    return Err(io_err(
                        path,
                        format!("cannot create a temporary file in {}", dir.display()),
                    )(e))
                }
            }
        };
        let out = OutputFile {
            path: path.to_path_buf(),
            dir,
            temp: Some(temp),
            file,
        };
        // The umask may have taken bits away: 0600 exactly.
        out.file
            .set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io_err(path, "cannot set its mode to 0600"))?;
        // Locked while any handle on it is open (its writer's, the thread syncing it): the
        // retention of another recorder sharing the directory leaves a file being written
        // alone (`parts::delete_oldest_beyond`). Advisory: a file system without locks skips it.
        // SAFETY: flock only takes an open descriptor, which `out.file` owns.
        let _ = unsafe { libc::flock(out.file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        Ok(out)
    }

    /// The path the output is for.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file's path until committed (for writers that open files by name; in a
    /// sticky directory such as /tmp no other user can replace it).
    pub fn temp_path(&self) -> Option<&Path> {
        self.temp.as_deref()
    }

    /// The open file (the temporary file until committed, then the output itself).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// A second handle on the open file (`dup`), for a writer that takes its file by value.
    pub fn try_clone_file(&self) -> Result<File, OutputError> {
        self.file
            .try_clone()
            .map_err(io_err(&self.path, "cannot duplicate its descriptor"))
    }

    /// True once [`commit`](OutputFile::commit) renamed the file over its path.
    pub fn is_committed(&self) -> bool {
        self.temp.is_none()
    }

    /// Syncs what was written and renames the temporary file over the path (checked again
    /// first: a link, a non-file or another user's file that appeared there since
    /// [`create`](OutputFile::create) is refused, and the temporary file is removed on drop).
    /// The file stays open: writing on after the commit writes into the output. Committing
    /// twice does nothing.
    pub fn commit(&mut self) -> Result<(), OutputError> {
        let Some(temp) = &self.temp else {
            return Ok(());
        };
        self.file
            .sync_all()
            .map_err(io_err(&self.path, "cannot sync the temporary file"))?;
        check(&self.path)?;
        std::fs::rename(temp, &self.path).map_err(io_err(
            &self.path,
            format!("cannot rename {} over it", temp.display()),
        ))?;
        self.temp = None;
        // The rename itself survives a crash of the machine once the directory is synced.
        if let Ok(d) = File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some(t) = self.temp.take() {
            let _ = std::fs::remove_file(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);
    impl Dir {
        fn new(name: &str) -> Dir {
            let p = std::env::temp_dir().join(format!(
                "iodump-output-{name}-{}-{:x}",
                std::process::id(),
                random_u64()
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
        fn names(&self) -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn an_input_is_never_an_output() {
        let d = Dir::new("input");
        let t = d.0.join("t.iod");
        std::fs::write(&t, "trace").unwrap();
        // The file itself, by another name, by a hard link.
        for same in [t.clone(), d.0.join(".").join("t.iod"), d.0.join("link.iod")] {
            if same.ends_with("link.iod") {
                std::fs::hard_link(&t, &same).unwrap();
            }
            let e = check_not_input(&same, std::slice::from_ref(&t)).unwrap_err();
            assert!(matches!(e, OutputError::IsInput { .. }), "{e}");
            assert!(
                e.to_string().contains("it is an input of this command"),
                "{e}"
            );
        }
        // A part of a recording, or a Parquet file of a dataset, named by its directory.
        let rec = d.0.join("rec");
        std::fs::create_dir_all(rec.join("io/host=a")).unwrap();
        let part = rec.join("iodump-20261207T000000.000Z-000001.iod");
        let pq = rec.join("io/host=a/part-0.parquet");
        for f in [&part, &pq] {
            std::fs::write(f, "x").unwrap();
            let e = check_not_input(f, std::slice::from_ref(&rec)).unwrap_err();
            assert!(
                e.to_string().ends_with(&format!("(in {})", rec.display())),
                "{e}"
            );
        }
        // Other files beside the parts, other paths, nothing there: writable.
        let beside = rec.join("report.html");
        std::fs::write(&beside, "old report").unwrap();
        let elsewhere = d.0.join("u.iod");
        std::fs::write(&elsewhere, "another trace").unwrap();
        let inputs = [t.clone(), rec.clone()];
        for ok in [&beside, &elsewhere, &d.0.join("none.iod")] {
            check_not_input(ok, &inputs).unwrap();
        }
    }

    #[test]
    fn a_new_file_appears_only_on_commit_and_is_private() {
        let d = Dir::new("new");
        let p = d.0.join("t.iod");
        let mut o = OutputFile::create(&p).unwrap();
        o.write_all(b"hello").unwrap();
        assert!(!p.exists());
        let temp = o.temp_path().unwrap().to_path_buf();
        assert!(temp
            .file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with("-t.iod"));
        assert_eq!(mode(&temp), 0o600);
        o.commit().unwrap();
        assert!(o.is_committed() && o.temp_path().is_none());
        // Written on after the commit: into the output.
        o.write_all(b" world").unwrap();
        drop(o);
        assert_eq!(std::fs::read(&p).unwrap(), b"hello world");
        assert_eq!(mode(&p), 0o600);
        assert_eq!(d.names(), ["t.iod"]);
    }

    #[test]
    fn an_existing_file_is_kept_until_commit_and_then_replaced_private() {
        let d = Dir::new("replace");
        let p = d.0.join("t.iod");
        std::fs::write(&p, b"old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut o = OutputFile::create(&p).unwrap();
        o.write_all(b"new").unwrap();
        drop(o);
        assert_eq!(std::fs::read(&p).unwrap(), b"old", "uncommitted: untouched");
        assert_eq!(d.names(), ["t.iod"], "the temporary file is removed");
        let mut o = OutputFile::create(&p).unwrap();
        o.write_all(b"new").unwrap();
        o.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(mode(&p), 0o600);
    }

    #[test]
    fn links_and_non_files_are_refused() {
        let d = Dir::new("refuse");
        let victim = d.0.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let link = d.0.join("link.iod");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let dangling = d.0.join("dangling.iod");
        std::os::unix::fs::symlink(d.0.join("nowhere"), &dangling).unwrap();
        for p in [&link, &dangling] {
            let e = OutputFile::create(p).unwrap_err();
            assert!(matches!(e, OutputError::Symlink { .. }), "{e}");
            assert!(e.to_string().contains("symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!d.0.join("nowhere").exists());
        let e = OutputFile::create(&d.0).unwrap_err();
        assert!(e.to_string().contains("it is a directory"), "{e}");
        let e = OutputFile::create(Path::new("/dev/null")).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let e = OutputFile::create(&d.0.join("x/")).unwrap_err();
        assert!(matches!(e, OutputError::NoFileName { .. }), "{e}");
        // A link that appears between create and commit is not replaced either.
        let p = d.0.join("late.iod");
        let mut o = OutputFile::create(&p).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        let e = o.commit().unwrap_err();
        assert!(matches!(e, OutputError::Symlink { .. }), "{e}");
        drop(o);
        assert!(std::fs::symlink_metadata(&p)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(
            d.names(),
            ["dangling.iod", "late.iod", "link.iod", "victim"]
        );
        // Directories: a link is refused, a real one (or none) is fine.
        assert!(check_dir(&d.0).is_ok());
        assert!(check_dir(&d.0.join("new")).is_ok());
        assert!(matches!(
            check_dir(&link).unwrap_err(),
            OutputError::Symlink { .. }
        ));
        assert!(matches!(
            check_dir(&victim).unwrap_err(),
            OutputError::WrongKind { .. }
        ));
        // A link to a directory, named with a trailing slash (`-o linkdir/`), is a link too.
        let real = d.0.join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, d.0.join("linkdir")).unwrap();
        for named in ["linkdir/", "linkdir//"] {
            let e = check_dir(&d.0.join(named)).unwrap_err();
            assert!(matches!(e, OutputError::Symlink { .. }), "{named}: {e}");
        }
        assert!(check_dir(&d.0.join("real/")).is_ok());
        assert!(check_dir(Path::new("/")).is_ok() || euid() != 0);
    }

    #[test]
    fn a_missing_directory_is_one_clear_error() {
        let e = OutputFile::create(Path::new("/nonexistent-dir/x.iod")).unwrap_err();
        let s = e.to_string();
        assert!(
            s.starts_with("cannot create /nonexistent-dir/x.iod: "),
            "{s}"
        );
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn a_bare_name_is_created_in_the_current_directory() {
        assert_eq!(
            split(Path::new("t.iod")).unwrap(),
            (PathBuf::from("."), OsString::from("t.iod"))
        );
        assert_eq!(
            split(Path::new("/t.iod")).unwrap(),
            (PathBuf::from("/"), OsString::from("t.iod"))
        );
        let long = OsString::from("x".repeat(255));
        assert!(temp_name(&long).len() <= 255);
    }
}
