//! Catalogue sections in `/home`: alice's projects (sources and git repositories), and
//! alice's and bob's personal files (pictures, documents, music, a browser profile and cache).

use super::builder::{log_normal, Builder, Size, GIB, KIB, MIB};
use super::names::{DOCUMENTS, MODULES, PROJECTS, THE_WALL, WORDS};
use super::FileClass;
use crate::host::devices::D_ROOT;
use crate::host::threads::Actors;

const HOME: FileClass = FileClass::Home;

const PROJECT_FILE: Size = log_normal(4.0 * KIB as f64, 0.8, 200, 64 * KIB);
const SOURCE_FILE: Size = log_normal(9.0 * KIB as f64, 1.0, 300, 400 * KIB);
const GIT_PACK: Size = log_normal(60.0 * MIB as f64, 0.8, 2 * MIB, GIB);
const GIT_OBJECT: Size = log_normal(3.0 * KIB as f64, 1.0, 100, 256 * KIB);
const GIT_FILES: [&str; 5] = ["index", "HEAD", "ORIG_HEAD", "FETCH_HEAD", "packed-refs"];

const PICTURE: Size = log_normal(3.5 * MIB as f64, 0.35, MIB, 12 * MIB);
const DOCUMENT: Size = log_normal(300.0 * KIB as f64, 1.2, KIB, 40 * MIB);
const DOWNLOADS: [(&str, u64); 2] = [
    ("ubuntu-24.04.1-desktop-amd64.iso", 6 * GIB),
    ("linux-6.18.tar.xz", 146 * MIB),
];
const DOTFILES: [&str; 5] = [
    ".bashrc",
    ".bash_history",
    ".profile",
    ".gitconfig",
    ".viminfo",
];
const TRACK: Size = log_normal(28.0 * MIB as f64, 0.4, 4 * MIB, 120 * MIB);
const FIREFOX_PROFILE_FILES: [&str; 5] = [
    "places.sqlite",
    "places.sqlite-wal",
    "cookies.sqlite",
    "favicons.sqlite",
    "sessionstore.jsonlz4",
];
const CACHE_ENTRY: Size = log_normal(40.0 * KIB as f64, 1.5, 512, 8 * MIB);

/// alice's projects, then one file of a `node_modules` tree too deep for its path to fit
/// (kept truncated), into [`projects`](super::FileLists::projects).
pub(super) fn projects(b: &mut Builder) {
    for (name, ext, manifest) in PROJECTS {
        project(b, name, ext, manifest);
    }
    let f = b.file(
        D_ROOT,
        "…/node_modules/.pnpm/@babel+core@7.24.0/node_modules/@babel/core/lib/transformation/file/index.js",
        24 * KIB,
        HOME,
    );
    b.paths[f as usize].truncated = true;
    b.lists.projects.push(f);
}

/// One project: top-level files, ten sources per module, and its git repository (two packs
/// with their indices, the usual files, fifty loose objects).
fn project(b: &mut Builder, name: &str, ext: &str, manifest: &str) {
    let base = format!("/home/alice/projects/{name}/");
    b.dir(D_ROOT);
    let top = [manifest, "README.md", ".gitignore", "LICENSE"];
    let files = b.add_each(D_ROOT, &base, &top, "", PROJECT_FILE, HOME);
    b.lists.projects.extend(files);
    for m in MODULES {
        b.dir(D_ROOT);
        let mut words = WORDS;
        b.rng.shuffle(&mut words);
        let dir = format!("{base}src/{m}/");
        let files = b.add_each(
            D_ROOT,
            &dir,
            &words[..10],
            &format!(".{ext}"),
            SOURCE_FILE,
            HOME,
        );
        b.lists.projects.extend(files);
    }
    b.dir(D_ROOT);
    for _ in 0..2 {
        let h = b.rng.hex(40);
        let bytes = b.draw(GIT_PACK);
        let pack = format!("{base}.git/objects/pack/pack-{h}");
        let f = b.file(D_ROOT, format!("{pack}.pack"), bytes, HOME);
        b.lists.projects.push(f);
        let f = b.file(D_ROOT, format!("{pack}.idx"), bytes / 40, HOME);
        b.lists.projects.push(f);
    }
    let git = format!("{base}.git/");
    let files = b.add_each(D_ROOT, &git, &GIT_FILES, "", Size::Bytes(64 * KIB), HOME);
    b.lists.projects.extend(files);
    for _ in 0..50 {
        let h = b.rng.hex(40);
        let path = format!("{base}.git/objects/{}/{}", &h[..2], &h[2..]);
        let f = b.add(D_ROOT, path, GIT_OBJECT, HOME);
        b.lists.projects.push(f);
    }
}

/// alice's pictures, documents, downloads and dotfiles (and deleted thumbnails), bob's music,
/// two Latin-1 file names and bob's browser profile and cache; then
/// [`home`](super::FileLists::home) is these files but the pictures, then the projects, then
/// the pictures.
pub(super) fn personal(b: &mut Builder, actors: &Actors) {
    b.dir(D_ROOT);
    for i in 0..200 {
        let n = 1000 + i * 3 + b.rng.below(3);
        let path = format!("/home/alice/Pictures/2025/IMG_{n:04}.jpg");
        let f = b.add(D_ROOT, path, PICTURE, HOME);
        b.lists.pictures.push(f);
    }
    b.dir(D_ROOT);
    let mut home = b.add_each(
        D_ROOT,
        "/home/alice/Documents/",
        &DOCUMENTS,
        "",
        DOCUMENT,
        HOME,
    );
    home.extend(b.add_sized(D_ROOT, "/home/alice/Downloads/", &DOWNLOADS, HOME));
    home.extend(b.add_each(
        D_ROOT,
        "/home/alice/",
        &DOTFILES,
        "",
        Size::Bytes(12 * KIB),
        HOME,
    ));
    b.dir(D_ROOT);
    for _ in 0..3 {
        let h = b.rng.hex(32);
        let path = format!("/home/alice/.cache/thumbnails/large/{h}.png");
        let f = b.file(D_ROOT, path, 96 * KIB, HOME);
        b.delete(f);
        b.lists.deleted_root.push(f);
        home.push(f);
    }
    b.dir(D_ROOT);
    for (i, t) in THE_WALL.iter().enumerate() {
        let path = format!(
            "/home/bob/Music/Pink Floyd/The Wall (1979)/{:02} {t}.flac",
            i + 1
        );
        home.push(b.add(D_ROOT, path, TRACK, HOME));
    }
    b.dir(D_ROOT);
    home.push(b.file(
        D_ROOT,
        b"/home/bob/old/r\xe9sum\xe9.txt".to_vec(),
        6 * KIB,
        HOME,
    ));
    home.push(b.file(
        D_ROOT,
        b"/home/bob/old/caf\xe9 menu.odt".to_vec(),
        40 * KIB,
        HOME,
    ));
    firefox(b, actors, &mut home);
    b.lists.home = home;
    b.lists.home.extend_from_slice(&b.lists.projects);
    b.lists.home.extend_from_slice(&b.lists.pictures);
}

/// bob's firefox profile and its cache entries (two of them deleted), all dirtied by
/// firefox's cache thread.
fn firefox(b: &mut Builder, actors: &Actors, home: &mut Vec<u32>) {
    b.dir(D_ROOT);
    let profile = format!(
        "/home/bob/.mozilla/firefox/{}.default-release/",
        b.rng.hex(8)
    );
    let size = Size::Bytes(10 * MIB);
    for f in b.add_each(D_ROOT, &profile, &FIREFOX_PROFILE_FILES, "", size, HOME) {
        b.files[f as usize].owner = actors.firefox;
        home.push(f);
    }
    b.dir(D_ROOT);
    for i in 0..320 {
        let h = b.rng.hex(40).to_uppercase();
        let path = format!("/home/bob/.cache/mozilla/firefox/cache2/entries/{h}");
        let f = b.add(D_ROOT, path, CACHE_ENTRY, HOME);
        b.files[f as usize].owner = actors.firefox;
        if i % 160 == 7 {
            b.delete(f);
            b.lists.deleted_root.push(f);
        }
        home.push(f);
    }
}
