//! The names of units after expansion: one fan-out per name, no plain unit named like a
//! fan-out, and no two units sharing a log folder (an instance `a[b]` is stored as `a__b`).

use std::collections::HashMap;

use super::Expander;
use crate::config::schema::{Sp, UnitSpec};
use crate::diagnostic::Loc;
use crate::model::unit_folder_name;

impl Expander<'_, '_> {
    /// Whether the fan-out `name` at `position` is the second of its name, reported if so. Its
    /// instances are then left out: a `deps: [t]` would otherwise quietly mean only one of the
    /// two (issue 36 item 18e: the second replaced the first in the table of fan-outs).
    pub(super) fn second_fanout(
        &mut self,
        name: &Sp<String>,
        position: usize,
        fanouts: &HashMap<String, (Vec<String>, Loc)>,
    ) -> bool {
        let Some((_, first_loc)) = fanouts.get(&name.value) else {
            return false;
        };
        self.push(
            self.source
                .error(
                    "duplicate-name",
                    name.loc,
                    format!("two `foreach` units are named `{}`", name.value),
                )
                .with_note(format!(
                    "the first is defined at line {}; this one is unit #{} of `units`, at line {}",
                    first_loc.line,
                    position + 1,
                    name.loc.line
                ))
                .with_hint(format!(
                    "give them distinct names (`{0}_a`, `{0}_b`): a `deps: [{0}]` cannot tell which one it means",
                    name.value
                )),
        );
        true
    }

    /// A plain unit may not share a fan-out's name, and no two units may share a log folder.
    pub(super) fn check_folders(
        &mut self,
        units: &[UnitSpec],
        fanouts: &HashMap<String, (Vec<String>, Loc)>,
    ) {
        let mut folders: HashMap<String, (&str, Loc)> = HashMap::with_capacity(units.len());
        for unit in units {
            let Some(name) = &unit.name else { continue };
            if unit.instance.is_none()
                && let Some((_, fanout_loc)) = fanouts.get(&name.value)
            {
                self.push(
                    self.source
                        .error(
                            "duplicate-name",
                            name.loc,
                            format!("duplicate unit name `{}`", name.value),
                        )
                        .with_note(format!(
                            "`{}` is a `foreach` unit defined at line {}",
                            name.value, fanout_loc.line
                        ))
                        .with_hint("unit names must be unique; rename one of them"),
                );
                continue;
            }
            let folder = unit_folder_name(&name.value).into_owned();
            // (A plain name's length is checked with the other name rules.)
            if unit.instance.is_some() && folder.len() > crate::validate::MAX_UNIT_NAME_BYTES {
                self.push(
                    self.source
                        .error(
                            "invalid-name",
                            name.loc,
                            format!(
                                "the instance `{}…` makes a log folder name of {} bytes, more than {}",
                                name.value.chars().take(32).collect::<String>(),
                                folder.len(),
                                crate::validate::MAX_UNIT_NAME_BYTES
                            ),
                        )
                        .with_hint("a unit name becomes a folder name: use shorter items (or a shorter unit name)"),
                );
                continue;
            }
            match folders.get(&folder) {
                Some((other, other_loc)) if *other != name.value => {
                    self.push(
                        self.source
                            .error(
                                "fanout-collision",
                                name.loc,
                                format!(
                                    "units `{other}` and `{}` would share the log folder `{folder}`",
                                    name.value
                                ),
                            )
                            .with_note(format!("`{other}` is defined at line {}", other_loc.line))
                            .with_hint("an instance `a[b]` is stored as `a__b`: rename the unit that looks like one"),
                    );
                }
                Some(_) => {}
                None => {
                    folders.insert(folder, (&name.value, name.loc));
                }
            }
        }
    }
}
