//! The `keel` crate's public surface, snapshotted: every item an embedder can name — the
//! items re-exported from the other crates, the types defined here with their public fields
//! and variants, their public methods with signatures, the traits they implement — one line
//! each. The SDK's API is Keel's one stable Rust promise (ARCHITECTURE.md, "Compatibility
//! promises"), so a change to it must show up as a reviewed diff of
//! `snapshots/…public_api__keel_public_surface.snap`.
//!
//! The surface is read from the source with `syn` (rather than from rustdoc's JSON, which
//! needs an unstable rustdoc flag and a second build of every dependency): the crate root and
//! its `pub mod`s are public, a private module contributes what the root re-exports from it,
//! and methods count wherever their `impl` block stands. Items behind a feature say so.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use quote::ToTokens;
use syn::{Attribute, ImplItem, Item, UseTree, Visibility};

/// One module's source: its path from the crate root and its items.
struct Module {
    path: Vec<String>,
    public: bool,
    items: Vec<Item>,
}

/// Reads the crate rooted at `lib` (its `lib.rs`) into modules, following `mod x;` to
/// `x.rs` or `x/mod.rs` beside the declaring file.
fn read_crate(lib: &Path) -> Vec<Module> {
    let file = syn::parse_file(&std::fs::read_to_string(lib).unwrap()).unwrap();
    let mut modules = Vec::new();
    collect(
        lib.parent().unwrap(),
        Vec::new(),
        true,
        file.items,
        &mut modules,
    );
    modules
}

fn collect(dir: &Path, path: Vec<String>, public: bool, items: Vec<Item>, out: &mut Vec<Module>) {
    for item in &items {
        let Item::Mod(module) = item else { continue };
        if has_cfg_test(&module.attrs) {
            continue;
        }
        let name = module.ident.to_string();
        let mut child = path.clone();
        child.push(name.clone());
        let child_public = public && is_pub(&module.vis);
        match &module.content {
            Some((_, inline)) => collect(dir, child, child_public, inline.clone(), out),
            None => {
                let (file, child_dir) = module_file(dir, &name);
                let parsed = syn::parse_file(&std::fs::read_to_string(&file).unwrap()).unwrap();
                collect(&child_dir, child, child_public, parsed.items, out);
            }
        }
    }
    out.push(Module {
        path,
        public,
        items,
    });
}

/// Where `mod name;` declared in a file of folder `dir` lives, and the folder of its own
/// submodules.
fn module_file(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let flat = dir.join(format!("{name}.rs"));
    match flat.exists() {
        true => (flat, dir.join(name)),
        false => (dir.join(name).join("mod.rs"), dir.join(name)),
    }
}

fn is_pub(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

fn has_cfg_test(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && tokens(&a.meta).contains("test"))
}

/// The `#[cfg(..)]` of an item, as a suffix.
fn cfg_of(attrs: &[Attribute]) -> String {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .map(|a| format!("  #[{}]", tokens(&a.meta)))
        .collect()
}

/// The traits a type derives.
fn derives(attrs: &[Attribute]) -> String {
    let names: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .map(|a| {
            let text = tokens(&a.meta);
            text.trim_start_matches("derive")
                .trim_matches(|c| c == '(' || c == ')')
                .to_owned()
        })
        .collect();
    match names.is_empty() {
        true => String::new(),
        false => format!(" derives {}", names.join(", ")),
    }
}

/// Token text with the spaces `quote` puts around punctuation taken out.
fn tokens(node: &impl ToTokens) -> String {
    let mut text = node.to_token_stream().to_string();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" ,", ","),
        (" :", ":"),
        ("( ", "("),
        (" )", ")"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        ("& ", "&"),
        ("[ ", "["),
        (" ]", "]"),
        (" ;", ";"),
        ("# [", "#["),
        ("' ", "'"),
        (" .", "."),
        (" (", "("),
    ] {
        text = text.replace(from, to);
    }
    text.replace("->", " -> ")
        .replace("  ", " ")
        .replace(",)", ")")
}

/// The public surface of the crate made of `modules`, one sorted line per item.
fn surface(crate_name: &str, modules: &[Module]) -> Vec<String> {
    let mut lines = BTreeSet::new();
    // Names a public module re-exports from a private one of this crate: those items are
    // public under the re-exporting module's path.
    let mut reexported: Vec<(Vec<String>, String, Vec<String>)> = Vec::new();
    for module in modules.iter().filter(|m| m.public) {
        for item in &module.items {
            let Item::Use(item) = item else { continue };
            if !is_pub(&item.vis) {
                continue;
            }
            let mut uses = Vec::new();
            flatten_use(&item.tree, String::new(), &mut uses);
            for (name, source) in uses {
                let at = join(crate_name, &module.path, &name);
                let local = source.split("::").next().is_some_and(|first| {
                    first == "crate"
                        || first == "self"
                        || modules
                            .iter()
                            .any(|m| m.path.first().map(String::as_str) == Some(first))
                });
                match local {
                    true => reexported.push((
                        module.path.clone(),
                        name.clone(),
                        source
                            .trim_start_matches("crate::")
                            .trim_start_matches("self::")
                            .split("::")
                            .map(str::to_owned)
                            .collect(),
                    )),
                    false => {
                        lines.insert(format!("pub use {at} = {source}{}", cfg_of(&item.attrs)));
                    }
                }
            }
        }
    }
    for module in modules {
        for item in &module.items {
            // An item of a private module is public where a public module re-exports it.
            let name = item_name(item);
            let path = match module.public {
                true => Some(module.path.clone()),
                false => name.as_ref().and_then(|name| {
                    reexported
                        .iter()
                        .find(|(_, alias, source)| {
                            source.last() == Some(name)
                                && source[..source.len() - 1] == module.path[..]
                                && alias == name
                        })
                        .map(|(at, _, _)| at.clone())
                }),
            };
            describe(crate_name, path.as_deref(), item, &mut lines);
        }
    }
    lines.into_iter().collect()
}

fn item_name(item: &Item) -> Option<String> {
    Some(match item {
        Item::Struct(s) => s.ident.to_string(),
        Item::Enum(e) => e.ident.to_string(),
        Item::Fn(f) => f.sig.ident.to_string(),
        Item::Trait(t) => t.ident.to_string(),
        Item::Const(c) => c.ident.to_string(),
        Item::Static(s) => s.ident.to_string(),
        Item::Type(t) => t.ident.to_string(),
        _ => return None,
    })
}

fn join(crate_name: &str, path: &[String], name: &str) -> String {
    let mut parts = vec![crate_name.to_owned()];
    parts.extend(path.iter().cloned());
    parts.push(name.to_owned());
    parts.join("::")
}

/// Adds the lines of one item: `path` is the module it is public in, if it is public.
fn describe(crate_name: &str, path: Option<&[String]>, item: &Item, lines: &mut BTreeSet<String>) {
    match item {
        // Methods and trait impls count wherever the block stands: the type is what is
        // public.
        Item::Impl(block) => {
            let ty = tokens(&block.self_ty);
            let cfg = cfg_of(&block.attrs);
            if let Some((_, trait_path, _)) = &block.trait_ {
                lines.insert(format!("impl {} for {ty}{cfg}", tokens(trait_path)));
                return;
            }
            for member in &block.items {
                if let ImplItem::Fn(f) = member
                    && is_pub(&f.vis)
                {
                    let signature =
                        tokens(&f.sig).replacen("fn ", &format!("fn {crate_name}::{ty}::"), 1);
                    lines.insert(format!("{signature}{cfg}{}", cfg_of(&f.attrs)));
                }
            }
        }
        _ => {
            let Some(path) = path else { return };
            let Some(name) = item_name(item) else { return };
            let at = join(crate_name, path, &name);
            match item {
                Item::Struct(s) if is_pub(&s.vis) => {
                    lines.insert(format!(
                        "pub struct {at}{}{}",
                        derives(&s.attrs),
                        cfg_of(&s.attrs)
                    ));
                    for field in s.fields.iter().filter(|f| is_pub(&f.vis)) {
                        let field_name = field.ident.as_ref().map(ToString::to_string);
                        lines.insert(format!(
                            "pub struct {at} field {}: {}",
                            field_name.unwrap_or_default(),
                            tokens(&field.ty)
                        ));
                    }
                }
                Item::Enum(e) if is_pub(&e.vis) => {
                    lines.insert(format!(
                        "pub enum {at}{}{}",
                        derives(&e.attrs),
                        cfg_of(&e.attrs)
                    ));
                    for variant in &e.variants {
                        let fields = match variant.fields.is_empty() {
                            true => String::new(),
                            false => tokens(&variant.fields),
                        };
                        lines.insert(format!("pub enum {at}::{}{fields}", variant.ident));
                    }
                }
                Item::Fn(f) if is_pub(&f.vis) => {
                    let signature =
                        tokens(&f.sig).replacen(&format!("fn {name}"), &format!("fn {at}"), 1);
                    lines.insert(format!("pub {signature}{}", cfg_of(&f.attrs)));
                }
                Item::Trait(t) if is_pub(&t.vis) => {
                    lines.insert(format!("pub trait {at}{}", cfg_of(&t.attrs)));
                }
                Item::Const(c) if is_pub(&c.vis) => {
                    lines.insert(format!("pub const {at}: {}", tokens(&c.ty)));
                }
                Item::Static(s) if is_pub(&s.vis) => {
                    lines.insert(format!("pub static {at}: {}", tokens(&s.ty)));
                }
                Item::Type(t) if is_pub(&t.vis) => {
                    lines.insert(format!("pub type {at} = {}", tokens(&t.ty)));
                }
                _ => {}
            }
        }
    }
}

/// The names a `use` tree brings in, each with the path it comes from.
fn flatten_use(tree: &UseTree, prefix: String, out: &mut Vec<(String, String)>) {
    let at = |segment: &str| match prefix.is_empty() {
        true => segment.to_owned(),
        false => format!("{prefix}::{segment}"),
    };
    match tree {
        UseTree::Path(path) => flatten_use(&path.tree, at(&path.ident.to_string()), out),
        UseTree::Name(name) => {
            let name = name.ident.to_string();
            match name.as_str() {
                "self" => {
                    let last = prefix.rsplit("::").next().unwrap_or_default().to_owned();
                    out.push((last, prefix.clone()));
                }
                _ => out.push((name.clone(), at(&name))),
            }
        }
        UseTree::Rename(rename) => {
            out.push((rename.rename.to_string(), at(&rename.ident.to_string())))
        }
        UseTree::Glob(_) => out.push(("*".to_owned(), at("*"))),
        UseTree::Group(group) => {
            for tree in &group.items {
                flatten_use(tree, prefix.clone(), out);
            }
        }
    }
}

#[test]
fn keel_public_surface() {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let lines = surface("keel", &read_crate(&lib));
    // The SDK names what it exports one by one: a glob re-export would put another crate's
    // whole surface into the promise unseen.
    let globs: Vec<&String> = lines.iter().filter(|l| l.contains("::*")).collect();
    assert!(
        globs.is_empty(),
        "glob re-exports in keel's surface: {globs:?}"
    );
    // The surface holds what every embedder uses, read correctly (not an empty listing).
    for expected in [
        "pub struct keel::Runtime derives Clone",
        "pub use keel::RequestOptions = keel_runtime::RequestOptions",
        "pub use keel::hooks::InProcessHook = keel_tools::hooks::InProcessHook",
    ] {
        assert!(
            lines.iter().any(|l| l == expected),
            "{expected} missing from {lines:#?}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("async fn keel::Runtime::request("))
    );
    insta::assert_snapshot!(lines.join("\n"));
}

/// Parses `source` as a crate root.
fn surface_of(source: &str) -> Vec<String> {
    let file = syn::parse_file(source).unwrap();
    let mut modules = Vec::new();
    collect(Path::new("."), Vec::new(), true, file.items, &mut modules);
    surface("demo", &modules)
}

#[test]
fn the_listing_changes_when_an_item_is_added_or_removed() {
    let base = r"
        pub use other::{Record, Status as State};
        pub use self::inner::Helper;
        mod inner { pub struct Helper; pub struct Hidden; }
        pub mod hooks { pub use other::hooks::Hook; }
        pub struct Runtime { kernel: u8, pub name: String }
        impl Runtime {
            pub fn request(&self, input: &str) -> Result<u8, Error> { todo!() }
            fn private(&self) {}
        }
        pub enum Error { Bad(String), Worse { at: u32 } }
    ";
    let listed = surface_of(base);
    assert_eq!(
        listed,
        [
            "fn demo::Runtime::request(&self, input: &str) -> Result<u8, Error>",
            "pub enum demo::Error",
            "pub enum demo::Error::Bad(String)",
            "pub enum demo::Error::Worse{ at: u32 }",
            "pub struct demo::Helper",
            "pub struct demo::Runtime",
            "pub struct demo::Runtime field name: String",
            "pub use demo::Record = other::Record",
            "pub use demo::State = other::Status",
            "pub use demo::hooks::Hook = other::hooks::Hook",
        ]
    );
    // A method added, a re-export removed, a variant added: each is a line of difference.
    let added = base.replace(
        "fn private(&self) {}",
        "fn private(&self) {} pub fn cancel(&self) -> bool { true }",
    );
    assert_eq!(surface_of(&added).len(), listed.len() + 1);
    let removed = base.replace(
        "pub use other::{Record, Status as State};",
        "pub use other::Record;",
    );
    assert_eq!(surface_of(&removed).len(), listed.len() - 1);
    let variant = base.replace("Bad(String),", "Bad(String), Gone,");
    assert!(surface_of(&variant).contains(&"pub enum demo::Error::Gone".to_owned()));
}
