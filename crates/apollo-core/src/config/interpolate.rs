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

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::diagnostic::closest_or_near;

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

/// A `${…}` that cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
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
            out.push_str(token);
        } else {
            match resolve(inner, scope, place) {
                Ok(value) => out.push_str(&value),
                Err((code, message, hint)) => {
                    let occurrence = problems.iter().filter(|p| p.token == token).count();
                    problems.push(Problem {
                        token: token.to_owned(),
                        occurrence,
                        code,
                        message,
                        hint,
                    });
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
/// (shell parameter names never hold a `.`).
fn is_ours(inner: &str) -> bool {
    if inner == "item" {
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

fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str> + Clone,
) -> Option<String> {
    closest_or_near(word, candidates).map(|suggestion| format!("did you mean `{suggestion}`?"))
}

fn resolve(inner: &str, scope: &Scope<'_>, place: Place) -> Result<String, Failure> {
    let (namespace, member) = inner.split_once('.').unwrap_or((inner, ""));
    match namespace {
        "params" => match scope.params.get(member) {
            Some(value) => Ok(value.clone()),
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
            Some(value) => Ok(value.clone()),
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
            ("name", Some(name)) => Ok(name.to_owned()),
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
            ("id", Place::Shell) => Ok("${APOLLO_RUN_ID}".to_owned()),
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
                return Ok(item.value.clone().unwrap_or_else(|| item.key.clone()));
            }
            match item.fields.iter().find(|(field, _)| field == member) {
                Some((_, value)) => Ok(value.clone()),
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
        run(&Scope {
            params: &params,
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
        fn interpolation_never_panics(text in "(\\$|\\{|\\}|[a-z.]|params|item|é| ){0,40}") {
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
