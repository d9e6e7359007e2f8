//! `${…}` interpolation (DESIGN §14, §17): `${params.x}`, `${env.X}`, `${unit.name}`,
//! `${run.id}`, `${item}` and `${item.field}`, in commands, env values, inputs, outputs,
//! workdir and deps — resolved when the config is loaded, before validation.
//!
//! Only those namespaces are apollo's. Everything else reaches the shell untouched: `$VAR`,
//! `${HOME}`, `${x:-default}`, `$$` (the shell's pid). `$${params.x}` writes a literal
//! `${params.x}`. A `${a.b}` with an unknown namespace is an error (no shell variable has a
//! `.` in its name, so it can only be a typo).
//!
//! `${run.id}` is not known when the config is loaded (a run is chosen or created after): in a
//! shell command (`prepare`, `execute`, `cleanup` written as a string) it becomes
//! `${APOLLO_RUN_ID}`, which every unit has in its environment; elsewhere it is an error.
//! So the run id never enters a unit's input hash: it is the same for every attempt of a run,
//! and a resume is unaffected.
//!
//! In a shell command a value never becomes code (DESIGN §18): it is written for where it
//! stands (see [`super::shell`]); a placeholder where no writing is safe (a here-document,
//! `$(( ))`, backticks, `${VAR:-…}`) is an error. `${params.x:raw}` (any namespace) writes the
//! value as it is — the explicit, documented hazard. Elsewhere (argument vectors, env values,
//! paths) a value is one string already and is written as it is.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::shell::{self, Placement, Unsafe, Value};
use crate::diagnostic::{Severity, closest_or_near};

/// The namespaces apollo interpolates.
pub(crate) const NAMESPACES: &[&str] = &["params", "env", "unit", "run", "item"];

/// A fan-out instance's item: its key (`eu`, `eu,a`), its value for a list fan-out, and its
/// fields for a product (`region` → `eu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) key: String,
    pub(crate) value: Option<String>,
    pub(crate) fields: Vec<(String, String)>,
}

/// What `${…}` can refer to at one place.
pub(crate) struct Scope<'a> {
    /// Every declared param, rendered (a required param that has no value renders empty; its
    /// absence is reported once, elsewhere).
    pub(crate) params: &'a BTreeMap<String, String>,
    /// The items of each list param (a list is written item by item in a shell command).
    pub(crate) lists: &'a BTreeMap<String, Vec<String>>,
    /// Where the names of the params referred to are noted (a unit receives
    /// `APOLLO_PARAM_<NAME>` for each).
    pub(crate) param_reads: Option<&'a std::cell::RefCell<std::collections::BTreeSet<String>>>,
    /// Whether to warn about what only `apollo check` points out (`:raw` values, and values
    /// whose meaning quoting changed).
    pub(crate) check_notes: bool,
    pub(crate) env: &'a BTreeMap<String, String>,
    /// Where the names of the environment variables looked up are noted (see
    /// [`LoadReads::env`](super::LoadReads::env)).
    pub(crate) env_reads: Option<&'a std::cell::RefCell<std::collections::BTreeSet<String>>>,
    /// The unit (instance) name, inside a unit.
    pub(crate) unit: Option<&'a str>,
    /// The fan-out item, inside a `foreach` unit.
    pub(crate) item: Option<&'a Item>,
}

impl Scope<'_> {
    /// The value of the environment variable `name`, noting that it was looked up.
    fn lookup_env(&self, name: &str) -> Option<&String> {
        if let Some(reads) = self.env_reads {
            reads.borrow_mut().insert(name.to_owned());
        }
        self.env.get(name)
    }
}

/// Where the text is used, for `${run.id}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// A command run by `/bin/sh -c`.
    Shell,
    /// Anything else: an argument vector, an env value, a path, a dep, a condition.
    Other,
}

/// A `${…}` that cannot be resolved or placed (an error), or that deserves a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) severity: Severity,
    /// The whole reference as written, `${params.dya}`: the diagnostic points at it.
    pub(crate) token: String,
    /// Which occurrence of `token` in the text (from 0).
    pub(crate) occurrence: usize,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) hint: Option<String>,
}

/// Interpolates `text`. Unresolvable references are left as written and reported.
pub(crate) fn interpolate<'t>(
    text: &'t str,
    scope: &Scope<'_>,
    place: Place,
) -> (Cow<'t, str>, Vec<Problem>) {
    if !text.contains('$') {
        return (Cow::Borrowed(text), Vec::new());
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut problems: Vec<Problem> = Vec::new();
    // Where each placeholder of a shell command stands, by byte offset, in order.
    let placements = match place {
        Place::Shell => shell::placements(text),
        Place::Other => Vec::new(),
    };
    let mut placements = placements.into_iter().peekable();
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        rest = &rest[dollar..];
        // `rest` starts with `$`.
        if let Some(after) = rest.strip_prefix("$$") {
            // `$${params.x}` is a literal `${params.x}`; any other `$$` is the shell's.
            if let Some(inner) = reference(after)
                && is_ours(inner)
            {
                out.push('$');
                out.push_str(&after[..inner.len() + 2]);
                rest = &after[inner.len() + 2..];
            } else {
                out.push_str("$$");
                rest = after;
            }
            continue;
        }
        let Some(inner) = reference(&rest[1..]) else {
            out.push('$');
            rest = &rest[1..];
            continue;
        };
        let token = &rest[..inner.len() + 3];
        if !is_ours(inner) {
            // The shell's `${…}`; its inside may hold one of ours (`${X:-${params.x}}`),
            // which is interpolated (and, in a shell command, refused: it cannot be placed).
            out.push_str("${");
            rest = &rest[2..];
            continue;
        } else {
            let offset = text.len() - rest.len();
            let placement = match place {
                Place::Shell => {
                    while placements.next_if(|(at, _)| *at < offset).is_some() {}
                    // A placeholder the lexer did not place is one it does not follow.
                    Some(
                        placements
                            .next_if(|(at, _)| *at == offset)
                            .map_or(Placement::Unsafe(Unsafe::Unrecognised), |(_, placement)| {
                                placement
                            }),
                    )
                }
                Place::Other => None,
            };
            let mut problem = |severity, (code, message, hint): Failure| {
                let occurrence = problems.iter().filter(|p| p.token == token).count();
                problems.push(Problem {
                    severity,
                    token: token.to_owned(),
                    occurrence,
                    code,
                    message,
                    hint,
                });
            };
            let (name, raw) = match inner.strip_suffix(":raw") {
                Some(name) => (name, true),
                None => (inner, false),
            };
            match resolve(name, scope, place) {
                Ok(resolved) => match placement {
                    None => out.push_str(&resolved.raw()),
                    Some(placement) => {
                        match write_in_shell(&resolved, placement, raw, name, scope) {
                            Ok((written, notes)) => {
                                out.push_str(&written);
                                for note in notes {
                                    problem(Severity::Warning, note);
                                }
                            }
                            Err(failure) => {
                                problem(Severity::Error, failure);
                                out.push_str(token);
                            }
                        }
                    }
                },
                Err(failure) => {
                    problem(Severity::Error, failure);
                    out.push_str(token);
                }
            }
        }
        rest = &rest[token.len()..];
    }
    out.push_str(rest);
    (Cow::Owned(out), problems)
}

/// The inside of `{…}` at the start of `text`, if `text` starts with `{` and has a `}`.
fn reference(text: &str) -> Option<&str> {
    let body = text.strip_prefix('{')?;
    let close = body.find('}')?;
    Some(&body[..close])
}

/// Whether `${inner}` is apollo's: `item`, or `name.rest` with an identifier before the dot
/// (shell parameter names never hold a `.`); either may end in `:raw`.
pub(crate) fn is_ours(inner: &str) -> bool {
    if inner == "item" || inner == "item:raw" {
        return true;
    }
    let Some((namespace, _)) = inner.split_once('.') else {
        return false;
    };
    let mut bytes = namespace.bytes();
    bytes
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

type Failure = (&'static str, String, Option<String>);

/// What a `${…}` stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Resolved {
    /// A value.
    Text(String),
    /// A list param's items.
    List(Vec<String>),
    /// Shell syntax that expands to the value when the unit runs (`${run.id}`): never code.
    Expansion(String),
}

impl Resolved {
    /// The text as written before values were quoted (a list's items joined by spaces).
    fn raw(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Resolved::Text(text) | Resolved::Expansion(text) => text.as_str().into(),
            Resolved::List(items) => items.join(" ").into(),
        }
    }
}

/// The name of the environment variable a unit receives a param in: `APOLLO_PARAM_` and the
/// name in upper case, any other character than a letter or digit as `_`.
pub(crate) fn param_variable(name: &str) -> String {
    let mut variable = String::with_capacity(name.len() + 13);
    variable.push_str("APOLLO_PARAM_");
    variable.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    variable
}

/// `resolved` written for `placement` in a shell command (`name` is the reference without
/// `${}`), with warnings for `apollo check`; `Err` where it cannot be placed.
fn write_in_shell(
    resolved: &Resolved,
    placement: Placement,
    raw: bool,
    name: &str,
    scope: &Scope<'_>,
) -> Result<(String, Vec<Failure>), Failure> {
    let mut notes = Vec::new();
    let value = match resolved {
        Resolved::Expansion(expansion) => {
            // `${APOLLO_RUN_ID}` is expanded by the shell, never parsed as code; inside `'…'`
            // the quote is closed around it so it is expanded at all.
            return Ok((
                match placement {
                    Placement::Single => format!("'\"{expansion}\"'"),
                    _ => expansion.clone(),
                },
                notes,
            ));
        }
        Resolved::Text(text) => Value::Text(text),
        Resolved::List(items) => Value::List(items),
    };
    if raw {
        if scope.check_notes {
            notes.push((
                "raw-value",
                format!("`${{{name}:raw}}` writes its value into the shell command as it is: a value holding `;`, `$(…)`, a quote or a newline runs as code"),
                Some(format!("drop `:raw` to have apollo quote the value{}", variable_hint(name).map_or_else(String::new, |hint| format!(", or {hint}")))),
            ));
        }
        return Ok((value.raw().into_owned(), notes));
    }
    match shell::quote(value, placement) {
        Ok(written) => {
            let before = value.raw();
            let changed = match value {
                Value::Text(text) => shell::meaning_changed(text, placement),
                // Each item was a word of its own only if it was one word.
                Value::List(items) => items
                    .iter()
                    .any(|item| shell::meaning_changed(item, placement)),
            };
            // (A unit name is never split; its `[…]` globbed only by accident.)
            if scope.check_notes && written != before && changed && !name.starts_with("unit.") {
                let was = match placement {
                    Placement::Double => "was expanded by the shell (`$`, `` ` ``, `\\`)",
                    Placement::Single => "ended the quotes around it",
                    _ => "was split into words, globbed, or run as shell syntax",
                };
                let what = match value {
                    Value::Text(_) => format!(
                        "the value of `${{{name}}}` is now quoted and reaches the command as one value"
                    ),
                    Value::List(_) => format!(
                        "the items of `${{{name}}}` are now quoted and reach the command as one word each"
                    ),
                };
                let list_hint = match (value, placement) {
                    (Value::Text(_), Placement::Bare) if name.starts_with("params.") => format!(
                        "if it is meant as several words, make `{}` a `type: list` param; ",
                        &name["params.".len()..]
                    ),
                    _ => String::new(),
                };
                notes.push((
                    "quoting-changed",
                    format!("{what}; before, it {was}"),
                    Some(format!("{list_hint}to keep the old behaviour (and its hazard) write `${{{name}:raw}}`")),
                ));
            }
            Ok((written.into_owned(), notes))
        }
        Err(kind) => Err((
            "unsafe-placeholder",
            format!(
                "`${{{name}}}` stands {} in a shell command, where apollo cannot write a value safely",
                kind.describe()
            ),
            Some(match variable_hint(name) {
                Some(hint) => format!("{hint} instead"),
                None => format!(
                    "set an environment variable from it (`env: {{VALUE: \"${{{name}}}\"}}`) and write `\"$VALUE\"` instead"
                ),
            }),
        )),
    }
}

/// How to use the value through the environment instead, where apollo sets a variable.
fn variable_hint(name: &str) -> Option<String> {
    let (namespace, member) = name.split_once('.')?;
    match namespace {
        "params" => Some(format!(
            "write `\"${}\"` (the unit's environment holds the value)",
            param_variable(member)
        )),
        "env" => Some(format!(
            "write `\"${member}\"` (the unit's environment holds the value)"
        )),
        "unit" => Some("write `\"$APOLLO_UNIT\"`".to_owned()),
        _ => None,
    }
}

fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str> + Clone,
) -> Option<String> {
    closest_or_near(word, candidates).map(|suggestion| format!("did you mean `{suggestion}`?"))
}

#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
fn resolve(inner: &str, scope: &Scope<'_>, place: Place) -> Result<Resolved, Failure> {
    let (namespace, member) = inner.split_once('.').unwrap_or((inner, ""));
    match namespace {
        "params" => match scope.params.get(member) {
            Some(value) => {
                if let Some(reads) = scope.param_reads {
                    reads.borrow_mut().insert(member.to_owned());
                }
                Ok(match scope.lists.get(member) {
                    Some(items) => Resolved::List(items.clone()),
                    None => Resolved::Text(value.clone()),
                })
            }
            None => {
                let hint = did_you_mean(member, scope.params.keys().map(String::as_str))
                    .or_else(|| {
                        Some(if scope.params.is_empty() {
                            "this pipeline declares no `params`".to_owned()
                        } else {
                            format!(
                                "the params of this pipeline are: {}",
                                scope
                                    .params
                                    .keys()
                                    .map(|name| format!("`{name}`"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        })
                    });
                Err(("unknown-param", format!("unknown param `{member}`"), hint))
            }
        },
        "env" => match scope.lookup_env(member) {
            Some(value) => Ok(Resolved::Text(value.clone())),
            None => Err((
                "unset-env",
                format!("environment variable `{member}` is not set"),
                did_you_mean(member, scope.env.keys().map(String::as_str)).or_else(|| {
                    Some(format!(
                        "set it in apollo's environment, or write `${{{member}}}` (without `env.`) for the shell to expand it when the unit runs"
                    ))
                }),
            )),
        },
        "unit" => match (member, scope.unit) {
            ("name", Some(name)) => Ok(Resolved::Text(name.to_owned())),
            ("name", None) => Err((
                "bad-interpolation",
                "`${unit.name}` is only known inside a unit".to_owned(),
                None,
            )),
            _ => Err((
                "bad-interpolation",
                format!("unknown field `{member}` of `unit`"),
                Some("the only field of `unit` is `name`: `${unit.name}`".to_owned()),
            )),
        },
        "run" => match (member, place) {
            ("id", Place::Shell) => Ok(Resolved::Expansion("${APOLLO_RUN_ID}".to_owned())),
            ("id", Place::Other) => Err((
                "bad-interpolation",
                "`${run.id}` is only known when the run starts, so it can be used in shell commands only".to_owned(),
                Some("use it in a `prepare`, `execute` or `cleanup` string (it becomes `${APOLLO_RUN_ID}`), or read `$APOLLO_RUN_ID` in the unit".to_owned()),
            )),
            _ => Err((
                "bad-interpolation",
                format!("unknown field `{member}` of `run`"),
                Some("the only field of `run` is `id`: `${run.id}`".to_owned()),
            )),
        },
        "item" => {
            let Some(item) = scope.item else {
                return Err((
                    "bad-interpolation",
                    format!("`${{{inner}}}` is only defined in a unit with `foreach`"),
                    None,
                ));
            };
            if member.is_empty() && !inner.contains('.') {
                return Ok(Resolved::Text(
                    item.value.clone().unwrap_or_else(|| item.key.clone()),
                ));
            }
            match item.fields.iter().find(|(field, _)| field == member) {
                Some((_, value)) => Ok(Resolved::Text(value.clone())),
                None if item.fields.is_empty() => Err((
                    "bad-interpolation",
                    format!("`${{{inner}}}`: this unit's `foreach` is a list, whose items have no fields"),
                    Some("write `${item}`; fields such as `${item.region}` come from a mapping `foreach: {region: [...], ...}`".to_owned()),
                )),
                None => Err((
                    "bad-interpolation",
                    format!("unknown field `{member}` of `item`"),
                    did_you_mean(member, item.fields.iter().map(|(field, _)| field.as_str()))
                        .or_else(|| {
                            Some(format!(
                                "the fields of `item` are: {}",
                                item.fields
                                    .iter()
                                    .map(|(field, _)| format!("`{field}`"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ))
                        }),
                )),
            }
        }
        _ => Err((
            "bad-interpolation",
            format!("unknown namespace `{namespace}` in `${{{inner}}}`"),
            did_you_mean(namespace, NAMESPACES.iter().copied()).or_else(|| {
                Some("apollo interpolates `${params.…}`, `${env.…}`, `${unit.name}`, `${run.id}` and `${item}`; write `$${…}` for a literal".to_owned())
            }),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn with_scope<T>(run: impl FnOnce(&Scope<'_>) -> T) -> T {
        let params = BTreeMap::from([
            ("day".to_owned(), "2026-11-30".to_owned()),
            ("regions".to_owned(), "eu us".to_owned()),
        ]);
        let env = BTreeMap::from([("HOME".to_owned(), "/home/a".to_owned())]);
        let item = Item {
            key: "eu,a".to_owned(),
            value: None,
            fields: vec![
                ("region".to_owned(), "eu".to_owned()),
                ("tier".to_owned(), "a".to_owned()),
            ],
        };
        let lists =
            BTreeMap::from([("regions".to_owned(), vec!["eu".to_owned(), "us".to_owned()])]);
        run(&Scope {
            params: &params,
            lists: &lists,
            param_reads: None,
            check_notes: true,
            env: &env,
            env_reads: None,
            unit: Some("load[eu,a]"),
            item: Some(&item),
        })
    }

    fn ok(text: &str, place: Place) -> String {
        with_scope(|scope| {
            let (out, problems) = interpolate(text, scope, place);
            assert!(problems.is_empty(), "{problems:?}");
            out.into_owned()
        })
    }

    #[test]
    fn apollo_namespaces_are_resolved() {
        assert_eq!(
            ok(
                "./x.sh ${params.day} ${item.region} ${unit.name} ${env.HOME}",
                Place::Other
            ),
            "./x.sh 2026-11-30 eu load[eu,a] /home/a"
        );
        assert_eq!(ok("echo ${run.id}", Place::Shell), "echo ${APOLLO_RUN_ID}");
        assert_eq!(ok("${item}", Place::Other), "eu,a");
    }

    #[test]
    fn shell_syntax_is_left_alone() {
        for text in [
            "echo $HOME ${HOME} $$ ${x:-a.b} ${#arr[@]} $ ${ $1 $(date)",
            "price: 5$",
            "$${HOME} $$$",
        ] {
            assert_eq!(ok(text, Place::Shell), text);
        }
        assert_eq!(ok("$${params.day}", Place::Shell), "${params.day}");
        assert_eq!(ok("$$${params.day}", Place::Shell), "$$2026-11-30");
    }

    #[test]
    fn typos_are_reported_with_a_suggestion() {
        with_scope(|scope| {
            let (out, problems) = interpolate("a ${params.dya} ${parms.day}", scope, Place::Shell);
            assert_eq!(out, "a ${params.dya} ${parms.day}");
            assert_eq!(problems.len(), 2);
            assert_eq!(problems[0].token, "${params.dya}");
            assert_eq!(problems[0].hint.as_deref(), Some("did you mean `day`?"));
            assert_eq!(problems[1].hint.as_deref(), Some("did you mean `params`?"));
            let (_, problems) = interpolate("${run.id}", scope, Place::Other);
            assert_eq!(problems.len(), 1);
        });
    }

    proptest! {
        #[test]
        fn interpolation_never_panics(text in "(\\$|\\{|\\}|[a-z.]|params|item|:raw|é| |'|\"|`|<<|EOF|\n|\\(|\\)|\\\\|#){0,40}") {
            with_scope(|scope| {
                let _ = interpolate(&text, scope, Place::Shell);
                let _ = interpolate(&text, scope, Place::Other);
            });
        }

        #[test]
        fn shell_references_pass_through(
            before in "[a-z /]{0,8}",
            name in "[A-Z_][A-Z0-9_]{0,6}",
            after in "[a-z /]{0,8}",
        ) {
            let text = format!("{before}$$ ${name} ${{{name}}} ${{HOME}}{after}");
            prop_assert_eq!(ok(&text, Place::Shell), text);
        }
    }
}
