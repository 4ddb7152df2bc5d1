"""Loading and validating the inputs of reports/plot.py: attnbench results files (schema attnbench.results/1, also
written by the peers) and `attnbench compare --json` files (schema attnbench.compare/1). Every field a chart
reads is checked here, so drawing never meets a malformed value; the accessors below rely on that."""
import json
import math

RESULTS_SCHEMA = "attnbench.results/1"
COMPARE_SCHEMA = "attnbench.compare/1"
KEY_FIELDS = ("group", "shape", "dtype", "kernel", "mode")
# The dims field that tells decode (one query token) from prefill, per op; other ops count as prefill.
Q_LEN_FIELD = {"attention": "max_seqlen_q", "gated_block": "seqlen"}


class InputError(Exception):
    """A file that is missing, unreadable, malformed or of another kind (exit code 2)."""


def _show(v):
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class _Checker:
    def __init__(self, path):
        self.path = path

    def fail(self, where, field, expected, value):
        at = f"row #{where}: " if where is not None else ""
        raise InputError(f"{self.path}: {at}field '{field}': expected {expected}, got {_show(value)}")

    def optional(self, obj, where, prefix, key, test, expected):
        """obj[key] absent, null or passing test."""
        v = obj.get(key)
        if v is not None and not test(v):
            self.fail(where, prefix + key, expected + " or null", v)
        return v


def load(path):
    """The parsed document, or InputError naming the file (and the row and field when one is malformed)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file")
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a results or compare file")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}")
    except (json.JSONDecodeError, RecursionError) as e:
        raise InputError(f"{path}: malformed JSON: {e}")
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema not in (RESULTS_SCHEMA, COMPARE_SCHEMA):
        raise InputError(f"{path}: not an attnbench results or compare file "
                         f"(field 'schema' is {_show(schema)}, expected {RESULTS_SCHEMA!r} or {COMPARE_SCHEMA!r})")
    c = _Checker(path)
    rows = doc.get("rows")
    if not isinstance(rows, list):
        c.fail(None, "rows", "a list of row objects", rows)
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise InputError(f"{path}: row #{i}: expected an object, got {_show(r)}")
        for k in KEY_FIELDS:
            if not isinstance(r.get(k), str):
                c.fail(i, k, "a string", r.get(k))
        (_check_results_row if schema == RESULTS_SCHEMA else _check_compare_row)(c, i, r)
    if schema == RESULTS_SCHEMA:
        _check_provenance(c, doc)
    else:
        c.optional(doc, None, "", "summary", lambda v: isinstance(v, dict), "an object")
        c.optional(doc, None, "", "against", lambda v: isinstance(v, str), "a string")
    return doc


def _check_provenance(c, doc):
    prov = c.optional(doc, None, "", "provenance", lambda v: isinstance(v, dict), "an object")
    if prov is None:
        return
    sweep = c.optional(prov, None, "provenance.", "sweep", lambda v: isinstance(v, dict), "an object")
    if sweep is None:
        return
    knobs = sweep.get("knobs")
    if not isinstance(knobs, dict):
        c.fail(None, "provenance.sweep.knobs", "an object of knob name to values", knobs)
    settings = sweep.get("settings")
    if not isinstance(settings, list):
        c.fail(None, "provenance.sweep.settings", "a list of objects", settings)
    for j, s in enumerate(settings):
        if not isinstance(s, dict):
            c.fail(None, f"provenance.sweep.settings[{j}]", "an object of knob name to value", s)


def _check_results_row(c, i, r):
    status = c.optional(r, i, "", "status", lambda v: isinstance(v, str), "a string") or "ok"
    op = c.optional(r, i, "", "op", lambda v: isinstance(v, str), "a string") or "attention"
    t = c.optional(r, i, "", "time_us", lambda v: isinstance(v, dict), "an object")
    if t is not None:
        if not _is_number(t.get("median")):
            c.fail(i, "time_us.median", "a finite number", t.get("median"))
        for k in ("q1", "q3"):
            c.optional(t, i, "time_us.", k, _is_number, "a finite number")
    dims = c.optional(r, i, "", "dims", lambda v: isinstance(v, dict), "an object")
    if status == "ok":
        if dims is None:
            c.fail(i, "dims", "an object (the row's status is ok)", dims)
        q = Q_LEN_FIELD.get(op)
        if q is not None:
            v = dims.get(q)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                c.fail(i, f"dims.{q}", "a positive integer", v)
    c.optional(r, i, "", "knobs", lambda v: isinstance(v, dict), "an object")
    for k in ("tflops", "gbps", "pct_peak_flops", "pct_peak_bw"):
        c.optional(r, i, "", k, _is_number, "a finite number")
    c.optional(r, i, "", "settled", lambda v: isinstance(v, bool), "true or false")
    c.optional(r, i, "", "unsettled", lambda v: isinstance(v, str), "a string")


def _check_compare_row(c, i, r):
    c.optional(r, i, "", "verdict", lambda v: isinstance(v, str), "a string")
    c.optional(r, i, "", "speedup", lambda v: _is_number(v) and v > 0, "a positive number")


# Accessors for validated rows.

def median(row):
    """The median latency of a timed ok row, else None."""
    t = row.get("time_us")
    if row.get("status", "ok") != "ok" or t is None:
        return None
    m = t["median"]
    return m if m > 0 else None


def spread(row):
    """(below, above) the median down to q1 and up to q3, (0, 0) where a quartile is missing."""
    m, t = median(row), row.get("time_us") or {}
    if m is None:
        return (0.0, 0.0)
    q1, q3 = t.get("q1"), t.get("q3")
    # A quartile below zero or on the wrong side of the median would make a negative whisker.
    below = min(max(m - q1, 0.0), m * 0.999) if q1 is not None else 0.0
    above = max(q3 - m, 0.0) if q3 is not None else 0.0
    return (below, above)


def settled(row):
    return row.get("settled") is not False


def is_decode(row):
    q = Q_LEN_FIELD.get(row.get("op") or "attention")
    return q is not None and (row.get("dims") or {}).get(q) == 1
