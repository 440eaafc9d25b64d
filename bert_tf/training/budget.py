"""Training to a wall-clock budget: the duration parser and the clock the run controller keeps.

A run given `--time_budget` trains until the budget is spent, and its learning-rate schedule
follows the budget instead of a step count (optimization.BudgetSchedule reads a "fraction of
the training time spent" that this clock sets before every compiled call), so warmup and decay
end exactly when the time is up (Izsak et al. 2021: tying the schedule to the budget is the
largest cheap gain of short pre-training).

What the budget covers: the whole command, from its start (set-up, input pipelines, compilation,
checkpoints) to its last file. Training stops early enough to leave time for what comes after
it (the final checkpoint, evaluation, the run's model files), estimated from what the run
measured. The seconds spent are part of every checkpoint, so a run killed and resumed continues
the same budget (the time between the kill and the restart does not count; the work since the
last checkpoint is lost, as with any resume).
"""

import re
import time

# What a --time_budget value looks like: numbers with a unit, largest first ("1h30m", "45m",
# "600s", "1.5h").
_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}
ACCEPTED_FORMS = "a duration such as 600s, 45m, 24h or 1h30m"
# Time kept for the end of the run is never less than this share of the budget.
_MIN_RESERVE_SHARE = 0.01


def parse_duration(text, flag="--time_budget"):
    """Seconds of a duration ("600s", "45m", "24h", "1h30m", "1.5h"); a ValueError naming
    `flag` and the accepted forms for anything else, zero or negative.

    >>> parse_duration("1h30m"), parse_duration("45m"), parse_duration("600s")
    (5400.0, 2700.0, 600.0)
    """
    value = str(text).strip().lower()
    parts = _PART.findall(value)
    if not value or not parts or "".join(n + u for n, u in parts) != value:
        raise ValueError(f"{flag}={text!r} does not parse: expected {ACCEPTED_FORMS}")
    units = [unit for _, unit in parts]
    if len(set(units)) != len(units) or units != sorted(units, key="hms".index):
        raise ValueError(f"{flag}={text!r} does not parse: expected {ACCEPTED_FORMS} (each "
                         "unit once, hours before minutes before seconds)")
    seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    if seconds <= 0:
        raise ValueError(f"{flag}={text!r} must be more than zero: expected {ACCEPTED_FORMS}")
    return seconds


def duration_flag_text(seconds):
    """A number of seconds in --time_budget's own form, its largest units first (what
    parse_duration reads back).

    >>> duration_flag_text(45.0), duration_flag_text(2700), duration_flag_text(5400.5)
    ('45s', '45m', '1h30m0.5s')
    """
    hours, rest = divmod(float(seconds), 3600)
    minutes, rest = divmod(rest, 60)
    parts = [f"{hours:.0f}h" if hours else "", f"{minutes:.0f}m" if minutes else "",
             f"{rest:.6g}s" if rest or not (hours or minutes) else ""]
    return "".join(parts)


def format_duration(seconds):
    """'1h02m03s' of a number of seconds (rounded down)."""
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s"


class BudgetClock:
    """The time a budgeted run has spent and has left, and the schedule's progress.

    Args:
      budget_seconds: the whole budget.
      start_time: `time.time()` when this process's part of the run began (the command's
        start: its set-up counts).
      spent_before: seconds earlier parts of the run spent (from the checkpoint resumed).
      fraction_before: the schedule's progress at that checkpoint, in [0, 1].
      reserve_seconds: a first estimate of what the run needs after training (evaluation,
        model files); the clock adds the checkpoint save time to it.
      save_seconds: a first estimate of a checkpoint save, until one is measured.
    """

    def __init__(self, budget_seconds, start_time, spent_before=0.0, fraction_before=0.0,
                 reserve_seconds=0.0, save_seconds=1.0):
        self.budget_seconds = float(budget_seconds)
        self._start = float(start_time)
        self._spent_before = float(spent_before)
        self._fraction_anchor = min(1.0, max(0.0, float(fraction_before)))
        self._anchor_time = None
        self._extra_reserve = float(reserve_seconds)
        self._save_guess = float(save_seconds)
        self._save_seconds = None

    def spent(self, now=None):
        """Seconds of the budget spent so far, earlier parts of the run included."""
        return self._spent_before + ((time.time() if now is None else now) - self._start)

    def left(self, now=None):
        return self.budget_seconds - self.spent(now)

    def reserve(self):
        """Seconds kept for the end of the run: the final checkpoint (as long as the slowest
        save so far) and the job's own estimate (evaluation, model files)."""
        save = self._save_seconds if self._save_seconds is not None else self._save_guess
        return max(save + self._extra_reserve, _MIN_RESERVE_SHARE * self.budget_seconds)

    def training_left(self, now=None):
        """Seconds training may still take before the reserve."""
        return self.left(now) - self.reserve()

    def note_save(self, seconds):
        self._save_seconds = max(seconds, self._save_seconds or 0.0)

    def set_reserve(self, seconds):
        """The job's estimate of what follows training (evaluation, model files)."""
        self._extra_reserve = max(0.0, float(seconds))

    def start_training(self, now=None):
        """Marks the first step: the schedule's progress runs from here to the budget's end."""
        self._anchor_time = time.time() if now is None else now

    def fraction(self, now=None):
        """The schedule's progress in [0, 1]: it moves linearly in time from where the run
        started training (or resumed) to 1 at the end of the training time."""
        if self._anchor_time is None:
            return self._fraction_anchor
        now = time.time() if now is None else now
        elapsed = now - self._anchor_time
        total = elapsed + max(0.0, self.training_left(now))
        if total <= 0:
            return 1.0
        return min(1.0, self._fraction_anchor + (1.0 - self._fraction_anchor) * elapsed / total)

    def fraction_per_second(self, now=None):
        """How fast the progress moves now: what is left of it over the training time left."""
        left = self.training_left(now)
        if left <= 0:
            return 0.0
        return (1.0 - self.fraction(now)) / left

    def state(self, now=None):
        """What a checkpoint keeps: {"seconds_spent", "schedule_fraction"}."""
        return {"seconds_spent": self.spent(now), "schedule_fraction": self.fraction(now)}
