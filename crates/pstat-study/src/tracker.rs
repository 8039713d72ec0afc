//! Counts a run down against its [`Plan`]. The tracker sits between the stages and the
//! caller's [`Progress`]: the stages announce which planned unit (or group of units) their
//! work belongs to, each computed unit that finishes is matched to the first pending planned
//! unit of that group, the caller hears where the whole run stands ([`RunStatus`]), and the
//! measured times become this machine's pace for later plans ([`CostBook`]).

use crate::costs::{CostBook, cost_class};
use crate::plan::Plan;
use crate::progress::{Progress, RunStatus};
use crate::unit::UnitKey;
use pstat_data::Domain;
use std::time::{Duration, Instant};

/// Seconds of estimate that weigh as much as this run's measurements in its pace: the
/// first short units do not swing the ETA.
const PACE_PRIOR_S: f64 = 60.0;

/// A [`Progress`] that counts a run down against its [`Plan`] and rescales the estimates by
/// the pace it measures.
pub struct Tracker<'p> {
    inner: &'p mut dyn Progress,
    plan: Plan,
    costs: CostBook,
    now: Box<dyn FnMut() -> Duration>,
    /// The announced group, and when its current unit began.
    group: Option<(UnitKey, Duration)>,
    /// Seconds measured and estimated for the units this run computed.
    measured_s: f64,
    estimated_s: f64,
}

impl<'p> Tracker<'p> {
    /// Counts `plan` down, reporting to `inner`; `costs` learns this machine's pace.
    pub fn new(plan: Plan, costs: CostBook, inner: &'p mut dyn Progress) -> Self {
        let started = Instant::now();
        Self::with_clock(plan, costs, inner, Box::new(move || started.elapsed()))
    }

    /// A tracker whose clock is `now` (time since the run started; tests control it).
    pub fn with_clock(
        plan: Plan,
        costs: CostBook,
        inner: &'p mut dyn Progress,
        now: Box<dyn FnMut() -> Duration>,
    ) -> Self {
        Tracker {
            inner,
            plan,
            costs,
            now,
            group: None,
            measured_s: 0.0,
            estimated_s: 0.0,
        }
    }

    /// How much slower (> 1) or faster this run is than its estimates so far.
    fn pace(&self) -> f64 {
        (self.measured_s + PACE_PRIOR_S) / (self.estimated_s + PACE_PRIOR_S)
    }

    /// The planned unit now being computed: the first pending one of the announced group.
    fn in_flight(&self) -> Option<usize> {
        let (group, _) = self.group.as_ref()?;
        self.plan
            .units
            .iter()
            .position(|u| !u.done && group.covers(&u.key))
    }

    fn status(&self, in_flight: Option<usize>) -> RunStatus {
        let mut remaining = Some(0.0);
        for (i, unit) in self.plan.units.iter().enumerate() {
            if !unit.done && Some(i) != in_flight {
                remaining = remaining.zip(unit.estimate_s).map(|(r, s)| r + s);
            }
        }
        RunStatus {
            done: self.plan.units.iter().filter(|u| u.done).count(),
            total: self.plan.units.len(),
            remaining_s: remaining.map(|r| r * self.pace()),
        }
    }

    /// Ends the announced group. A group that names one unit exactly is that unit, done
    /// even when it computed nothing (activations found in the cache).
    fn close_group(&mut self) {
        if let Some((group, _)) = self.group.take()
            && let Some(unit) = self.plan.units.iter_mut().find(|u| u.key == group)
        {
            unit.done = true;
        }
    }

    /// A stage of a cell has returned: all its units are done, whatever was matched. Saves
    /// the paces measured so far.
    pub fn finish_stage(&mut self, model: &str, domain: Domain, stage: &str) {
        self.close_group();
        for unit in &mut self.plan.units {
            if unit.key.model == model
                && unit.key.domain == domain
                && unit.key.kind.stage() == stage
            {
                unit.done = true;
            }
        }
        if let Err(err) = self.costs.save() {
            tracing::warn!("saving this machine's pace: {err:#}");
        }
    }
}

impl pstat_prompt::Progress for Tracker<'_> {
    fn start(&mut self, unit: &str, n: usize) {
        let status = self.status(self.in_flight());
        self.inner.run_status(&status);
        self.inner.start(unit, n);
    }

    fn advance(&mut self, n: usize) {
        self.inner.advance(n);
    }

    fn finish(&mut self, resumed: bool) {
        if !resumed
            && let Some(i) = self.in_flight()
            && let Some((_, since)) = self.group.as_mut()
        {
            let now = (self.now)();
            let took = now.saturating_sub(*since).as_secs_f64();
            *since = now;
            let unit = &mut self.plan.units[i];
            unit.done = true;
            tracing::debug!("unit {} computed in {took:.1} s", unit.key);
            if let (Some(estimate), Some(reference)) = (unit.estimate_s, unit.reference_s) {
                self.measured_s += took;
                self.estimated_s += estimate;
                let class = cost_class(&unit.key);
                self.costs.record(&unit.key.model, &class, took, reference);
            }
        }
        let status = self.status(None);
        self.inner.run_status(&status);
        self.inner.finish(resumed);
    }
}

impl Progress for Tracker<'_> {
    fn stage(&mut self, name: &str) {
        self.inner.stage(name);
    }

    fn note(&mut self, message: &str) {
        self.inner.note(message);
    }

    fn unit(&mut self, key: &UnitKey) {
        self.close_group();
        tracing::debug!("unit {key} begins");
        let now = (self.now)();
        self.group = Some((key.clone(), now));
        self.inner.unit(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unit::PlannedUnit;
    use crate::unit::{UnitKind, Work};
    use pstat_prompt::Progress as _;
    use pstat_tables::{Baseline, PromptFormat};
    use std::cell::Cell;
    use std::rc::Rc;

    /// Records the statuses it is sent.
    #[derive(Default)]
    struct Statuses(Vec<RunStatus>);

    impl pstat_prompt::Progress for Statuses {
        fn start(&mut self, _: &str, _: usize) {}
        fn advance(&mut self, _: usize) {}
        fn finish(&mut self, _: bool) {}
    }

    impl Progress for Statuses {
        fn stage(&mut self, _: &str) {}
        fn note(&mut self, _: &str) {}
        fn run_status(&mut self, status: &RunStatus) {
            self.0.push(*status);
        }
    }

    fn prompt(condition: &str, done: bool) -> PlannedUnit {
        PlannedUnit {
            key: UnitKey {
                format: Some(PromptFormat::Plain),
                baseline: Some(Baseline::Empty),
                condition: Some(condition.into()),
                ..UnitKey::new("m", Domain::CityLocations, UnitKind::Prompt)
            },
            layer: None,
            work: Work::Prompts {
                statements: 10,
                k: 20,
            },
            estimate_s: Some(100.0),
            reference_s: Some(100.0),
            done,
        }
    }

    #[test]
    fn computed_units_count_down_the_run_and_set_its_pace() {
        let activations = PlannedUnit {
            key: UnitKey::new("m", Domain::CityLocations, UnitKind::Activations),
            work: Work::Statements(10),
            ..prompt("x", false)
        };
        let plan = Plan {
            units: vec![
                activations.clone(),
                prompt("baseline", true),
                prompt("a", false),
                prompt("b", false),
            ],
            models: 1,
            domains: 1,
            cost_sources: vec![],
        };
        let t = Rc::new(Cell::new(0u64));
        let clock = t.clone();
        let mut statuses = Statuses::default();
        {
            let mut tracker = Tracker::with_clock(
                plan,
                CostBook::reference_only(),
                &mut statuses,
                Box::new(move || Duration::from_secs(clock.get())),
            );
            // Activations found in the cache: the unit is done without a measurement.
            tracker.unit(&activations.key);
            let group = UnitKey {
                format: Some(PromptFormat::Plain),
                baseline: Some(Baseline::Empty),
                ..UnitKey::new("m", Domain::CityLocations, UnitKind::Prompt)
            };
            tracker.unit(&group);
            // The stored baseline is skipped; `a` is in flight and takes 340 s, not 100.
            tracker.start("baseline", 10);
            tracker.finish(true);
            tracker.start("a", 10);
            t.set(340);
            tracker.finish(false);
            tracker.start("b", 10);
        }
        let expected = |done, remaining_s| RunStatus {
            done,
            total: 4,
            remaining_s: Some(remaining_s),
        };
        assert_eq!(
            statuses.0,
            [
                // The baseline's start: `a` is the first pending unit of the group.
                expected(2, 100.0),
                expected(2, 200.0),
                expected(2, 100.0),
                // `a` done: b's 100 s at this run's pace, (340 + 60) / (100 + 60).
                expected(3, 250.0),
                expected(3, 0.0),
            ]
        );
    }
}
