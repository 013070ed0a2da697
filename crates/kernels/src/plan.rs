//! Flattening many callables into one deduplicated list of units.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use crate::error::UnitFailure;
use crate::key::{self, UnitKey};
use crate::report::UnitKind;
use crate::unit::{CallableSpec, HostUnit, IncoreUnit, OrchUnit};

#[derive(Debug, Clone)]
pub(crate) enum Job {
    Incore(IncoreUnit),
    Orch(OrchUnit),
    Host(HostUnit),
}

#[derive(Debug, Clone)]
pub(crate) struct PlanEntry {
    pub job: Job,
    /// `<label>/<name>` of the first spec that uses the unit.
    pub display: String,
    pub kind: UnitKind,
}

/// Which plan entries one valid spec needs.
#[derive(Debug, Clone)]
pub(crate) struct SpecPlan {
    pub orch: usize,
    /// Parallel to `spec.incores`.
    pub incores: Vec<usize>,
}

#[derive(Debug)]
pub(crate) struct Plan {
    pub entries: Vec<PlanEntry>,
    /// Parallel to the specs; `Err` holds the validation failures.
    pub specs: Vec<Result<SpecPlan, Vec<UnitFailure>>>,
    /// Parallel to the host programs: their entries (after every
    /// callable's).
    pub hosts: Vec<usize>,
}

/// Problems visible without compiling anything. An invalid spec gets no
/// units planned, so it cannot make a valid spec's build slower.
pub(crate) fn validate(spec: &CallableSpec) -> Result<(), Vec<UnitFailure>> {
    let mut seen: HashMap<u32, &str> = HashMap::new();
    let mut failures = Vec::new();
    for unit in &spec.incores {
        match seen.entry(unit.func_id) {
            Entry::Occupied(first) => failures.push(UnitFailure::DuplicateFuncId {
                func_id: unit.func_id,
                first: (*first.get()).to_owned(),
                second: unit.name.clone(),
            }),
            Entry::Vacant(slot) => {
                slot.insert(&unit.name);
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures)
    }
}

pub(crate) fn plan(specs: &[CallableSpec]) -> Plan {
    plan_with_hosts(specs, &[])
}

/// [`plan`] of `specs`, then the distinct host programs of `hosts`.
pub(crate) fn plan_with_hosts(specs: &[CallableSpec], hosts: &[HostUnit]) -> Plan {
    let mut entries = Vec::new();
    let mut by_descriptor: HashMap<UnitKey, usize> = HashMap::new();
    let mut add = |descriptor: UnitKey, make: &dyn Fn() -> PlanEntry| -> usize {
        *by_descriptor.entry(descriptor).or_insert_with(|| {
            entries.push(make());
            entries.len() - 1
        })
    };

    let mut spec_plans = Vec::with_capacity(specs.len());
    for spec in specs {
        if let Err(failures) = validate(spec) {
            spec_plans.push(Err(failures));
            continue;
        }
        let orch_unit = &spec.orchestration;
        let orch = add(key::orch_descriptor(orch_unit), &|| PlanEntry {
            job: Job::Orch(orch_unit.clone()),
            display: format!("{}/{}", spec.label, orch_unit.name),
            kind: UnitKind::Orchestration,
        });
        let incores = spec
            .incores
            .iter()
            .map(|unit| {
                add(key::incore_descriptor(unit), &|| PlanEntry {
                    job: Job::Incore(unit.clone()),
                    display: format!("{}/{}", spec.label, unit.name),
                    kind: UnitKind::Incore {
                        func_id: unit.func_id,
                        core: unit.core,
                    },
                })
            })
            .collect();
        spec_plans.push(Ok(SpecPlan { orch, incores }));
    }
    let hosts = hosts
        .iter()
        .map(|unit| {
            add(key::host_descriptor(unit), &|| PlanEntry {
                job: Job::Host(unit.clone()),
                display: format!("{}/{}", unit.label, unit.name),
                kind: UnitKind::Host,
            })
        })
        .collect();
    Plan {
        entries,
        specs: spec_plans,
        hosts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unit::CoreType;

    fn incore(name: &str, func_id: u32, source: &str) -> IncoreUnit {
        IncoreUnit {
            name: name.into(),
            func_id,
            core: CoreType::Aiv,
            kind: crate::unit::IncoreKind::Image,
            source: source.into(),
            include_dirs: vec![],
            defines: vec![],
            flags: vec![],
        }
    }

    fn spec(label: &str, incores: Vec<IncoreUnit>) -> CallableSpec {
        CallableSpec {
            label: label.into(),
            orchestration: OrchUnit {
                name: "orch".into(),
                source: "orch.c".into(),
                function: "entry".into(),
                include_dirs: vec![],
                defines: vec![],
                flags: Vec::new(),
            },
            incores,
        }
    }

    #[test]
    fn shared_units_are_planned_once() {
        let specs = [
            spec(
                "a",
                vec![incore("add", 0, "add.c"), incore("mul", 1, "mul.c")],
            ),
            spec("b", vec![incore("plus", 3, "add.c")]),
        ];
        let plan = plan(&specs);
        assert_eq!(plan.entries.len(), 3, "orch.c, add.c, mul.c");
        let (Ok(a), Ok(b)) = (&plan.specs[0], &plan.specs[1]) else {
            panic!("both specs are valid");
        };
        assert_eq!(a.orch, b.orch);
        assert_eq!(a.incores[0], b.incores[0]);
        assert_eq!(plan.entries[a.incores[0]].display, "a/add");
    }

    #[test]
    fn duplicate_func_ids_name_both_kernels() {
        let specs = [spec(
            "s",
            vec![incore("add", 2, "add.c"), incore("mul", 2, "mul.c")],
        )];
        let plan = plan(&specs);
        assert!(plan.entries.is_empty(), "invalid specs plan nothing");
        let Err(failures) = &plan.specs[0] else {
            panic!("duplicate func_id must be rejected");
        };
        let msg = failures[0].to_string();
        assert!(
            msg.contains("`add`") && msg.contains("`mul`") && msg.contains("func_id 2"),
            "{msg}"
        );
    }
}
