//! Precompiled preambles of hosted kernels (issue 29, item 7).
//!
//! A PTO-ISA kernel spends most of its ~2 s compile parsing the same few
//! thousand lines of `pto/pto-inst.hpp` and the C++ library behind it.
//! Every kernel of a suite opens the same way: a block of directives
//! (`#include <cstdint>`, `#ifndef __aicore__ ... #endif`,
//! `#include <pto/pto-inst.hpp>`) before its first line of code. That
//! block is its *preamble*; the builder precompiles it once per toolchain,
//! flags and text (a PCH, cached like a unit) and compiles each kernel
//! from it.
//!
//! Exactness: the kernel is not compiled with the PCH *in front of* its
//! own preamble (that would process the preamble twice, which is wrong
//! for an unguarded header or a conditional that reads a macro the
//! preamble defines later). It is compiled from a copy whose preamble
//! lines are blank, behind `#line 1 "<source>"`, so line numbers,
//! `__FILE__` and diagnostics read as the original's, and with `-iquote
//! <the source's directory>` first, so `#include "x"` finds what it found
//! beside the original. The compiler sees the preamble's directives once,
//! in the same order, then the rest of the file.
//!
//! What counts as a preamble, conservatively: leading blank lines,
//! comments and the directives `#include <...>`, `#define`, `#undef` and
//! the conditionals, ending after the last `#include <...>` of a header
//! found in an include root (or after the conditional holding it). A quoted include,
//! any other directive, a line continuation or code ends it; a kernel
//! whose preamble includes nothing from an include root has none.

/// The directives a kernel's compile can take precompiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Preamble {
    /// Its directives, one per line, comments removed: the text of the
    /// precompiled header (equal for kernels that differ only in comments
    /// and spacing, so they share one PCH).
    pub text: String,
    /// How many lines of the source it spans.
    pub lines: usize,
}

/// The preamble of `source`, if it includes a header `in_root` accepts
/// (the name as written between `<` and `>`).
pub(crate) fn find(source: &str, in_root: impl Fn(&str) -> bool) -> Option<Preamble> {
    let mut strip = CommentStripper::default();
    let mut directives: Vec<String> = Vec::new();
    let mut depth = 0usize;
    // An include-root header was included since the last possible end.
    let mut rooted = false;
    let mut found: Option<Preamble> = None;
    for (index, line) in source.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.ends_with('\\') {
            break;
        }
        let code = strip.line(line);
        let code = code.trim();
        if code.is_empty() {
            continue;
        }
        let Some(directive) = code.strip_prefix('#') else {
            break;
        };
        let directive = directive.trim_start();
        let name_len = directive
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(directive.len());
        let (name, rest) = directive.split_at(name_len);
        let included = match name {
            "include" => match angle_name(rest) {
                Some(header) => Some(header),
                None => break,
            },
            "define" | "undef" => None,
            "if" | "ifdef" | "ifndef" => {
                depth += 1;
                None
            }
            "elif" | "elifdef" | "elifndef" | "else" if depth > 0 => None,
            "endif" if depth > 0 => {
                depth -= 1;
                None
            }
            _ => break,
        };
        directives.push(format!("#{directive}"));
        rooted |= included.is_some_and(&in_root);
        // It may end where no conditional and no comment is open (an
        // open comment would lose its opening line to the blanking).
        if rooted && depth == 0 && !strip.in_block {
            rooted = false;
            let mut text = directives.join("\n");
            text.push('\n');
            found = Some(Preamble {
                text,
                lines: index + 1,
            });
        }
    }
    found
}

/// `source` with its first `preamble_lines` lines blank, behind a `#line`
/// directive naming `presumed` (the path the compiler is given for the
/// original), so every later line keeps its number and file name.
pub(crate) fn blanked(source: &str, preamble_lines: usize, presumed: &str) -> String {
    let mut offset = 0;
    for _ in 0..preamble_lines {
        match source[offset..].find('\n') {
            Some(newline) => offset += newline + 1,
            None => {
                offset = source.len();
                break;
            }
        }
    }
    let escaped = presumed.replace('\\', "\\\\").replace('"', "\\\"");
    let mut out = format!("#line 1 \"{escaped}\"\n");
    out.push_str(&"\n".repeat(preamble_lines));
    out.push_str(&source[offset..]);
    out
}

/// `<name>` at the start of `rest` (after `#include`).
fn angle_name(rest: &str) -> Option<&str> {
    let body = rest.trim_start().strip_prefix('<')?;
    let end = body.find('>')?;
    body[end + 1..].trim().is_empty().then(|| &body[..end])
}

/// Removes `//` and `/* */` comments line by line, tracking a block
/// comment across lines and leaving string and character literals alone.
#[derive(Default)]
struct CommentStripper {
    in_block: bool,
}

impl CommentStripper {
    fn line(&mut self, line: &str) -> String {
        let mut out = String::with_capacity(line.len());
        let mut chars = line.chars().peekable();
        let mut quote: Option<char> = None;
        while let Some(c) = chars.next() {
            if self.in_block {
                if c == '*' && chars.peek() == Some(&'/') {
                    chars.next();
                    self.in_block = false;
                    out.push(' ');
                }
                continue;
            }
            if let Some(q) = quote {
                out.push(c);
                if c == '\\' {
                    if let Some(escaped) = chars.next() {
                        out.push(escaped);
                    }
                } else if c == q {
                    quote = None;
                }
                continue;
            }
            match c {
                '/' if chars.peek() == Some(&'/') => break,
                '/' if chars.peek() == Some(&'*') => {
                    chars.next();
                    self.in_block = true;
                }
                '"' | '\'' => {
                    quote = Some(c);
                    out.push(c);
                }
                _ => out.push(c),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pto(name: &str) -> bool {
        name.starts_with("pto/")
    }

    #[test]
    fn the_original_suites_openings_are_preambles() {
        let source = "/*\n * Copyright\n */\n/**\n * Tile add\n */\n\n#include <cstdint>\n\
                      #include <pto/pto-inst.hpp>\n#include <pto/common/constants.hpp>\n\n\
                      #include \"tensor.h\"\nusing namespace pto;\n";
        let p = find(source, pto).expect("a preamble");
        assert_eq!(
            p.text,
            "#include <cstdint>\n#include <pto/pto-inst.hpp>\n#include <pto/common/constants.hpp>\n"
        );
        assert_eq!(p.lines, 10, "up to the last PTO include");

        let guarded = "#include <cstdint>\n\n#ifndef __gm__\n#define __gm__\n#endif\n\
                       #ifndef __aicore__\n#if defined(__CPU_SIM)\n#define __aicore__\n#else\n\
                       #define __aicore__ [aicore]\n#endif\n#endif  // aicore\n\n\
                       #include <pto/pto-inst.hpp>\n#include \"tensor.h\"\n";
        let p = find(guarded, pto).expect("conditionals are part of it");
        assert_eq!(p.lines, 14);
        assert!(
            p.text.contains("#endif\n#include <pto/pto-inst.hpp>"),
            "{}",
            p.text
        );
        assert!(!p.text.contains("aicore\n#endif  //"), "comments removed");
    }

    #[test]
    fn comments_and_spacing_do_not_change_the_text() {
        let a = find("// a\n#include <pto/x.hpp>\nint x;\n", pto).expect("a");
        let b = find("/* b */ #include <pto/x.hpp> // c\n\nint y;\n", pto).expect("b");
        assert_eq!(a.text, b.text);
    }

    #[test]
    fn what_ends_a_preamble_or_gives_none() {
        assert_eq!(
            find("#include <cstdint>\nint x;\n", pto),
            None,
            "no root header"
        );
        assert_eq!(
            find("#include \"local.h\"\n#include <pto/x.hpp>\n", pto),
            None,
            "a quoted include ends it"
        );
        assert_eq!(
            find("#pragma once\n#include <pto/x.hpp>\n", pto),
            None,
            "other directives end it"
        );
        assert_eq!(
            find("int x;\n#include <pto/x.hpp>\n", pto),
            None,
            "code ends it"
        );
        assert_eq!(
            find("#define A \\\n  1\n#include <pto/x.hpp>\n", pto),
            None,
            "a continuation ends it"
        );
        assert_eq!(
            find("#ifdef A\n#include <pto/x.hpp>\n#endif\n", pto)
                .expect("the conditional closes")
                .lines,
            3
        );
        assert_eq!(
            find("#ifdef A\n#include <pto/x.hpp>\nint x;\n", pto),
            None,
            "not inside an open conditional"
        );
        assert_eq!(
            find("#include <pto/x.hpp> /* open\n comment */\nint x;\n", pto),
            None,
            "not where a comment stays open"
        );
        assert_eq!(
            find("#define S \"//\"\n#include <pto/x.hpp>\n", pto)
                .expect("a string is not a comment")
                .text,
            "#define S \"//\"\n#include <pto/x.hpp>\n"
        );
    }

    #[test]
    fn blanking_keeps_every_later_line_where_it_was() {
        let source = "#include <pto/x.hpp>\r\n#include <pto/y.hpp>\nint x;\nint y;";
        let copy = blanked(source, 2, "kernels/k.cpp");
        assert_eq!(copy, "#line 1 \"kernels/k.cpp\"\n\n\nint x;\nint y;");
        assert_eq!(blanked("#include <a>", 1, "a\"b"), "#line 1 \"a\\\"b\"\n\n");
    }
}
