"""The default collection: real timeseries read from files shipped inside PyPI packages
(statsmodels and vega_datasets), from disk, with no network.

Every series is listed in :data:`MANIFEST` (source file, domain, frequency, seasonal period,
length, licence); the same table is committed as ``trainer/DATA_MANIFEST.md`` and
``trainer/DATA_MANIFEST.csv`` (regenerate with ``python -m tenzro_trainer.data.collection``).
Gaps (co2's missing weeks, missing hours) are filled by linear interpolation in time order.
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from tenzro_trainer.data.loader import validate_long_format
from tenzro_trainer.errors import DataError


@dataclass(frozen=True)
class SeriesInfo:
    """One manifest row: where a series comes from and what it is."""

    unique_id: str
    source: str  # package-relative path of the shipped file, with the column used
    domain: str
    frequency: str  # pandas offset alias: H, D, W, M, Q, Y
    season: int  # seasonal period used by SeasonalNaive and MASE
    length: int
    licence: str


SEASON = {"H": 24, "D": 7, "W": 52, "M": 12, "Q": 4, "Y": 1}
_SM = "statsmodels (BSD-3-Clause)"
_VEGA = "vega_datasets (MIT; data from the Vega project, public sources)"


def _pkg_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise DataError(f"package {name!r} is not installed; the default collection reads files it ships")
    return Path(spec.origin).parent


def _long(uid: str, ds, y) -> pd.DataFrame:
    s = pd.Series(np.asarray(y, dtype="float64"), index=pd.DatetimeIndex(ds)).sort_index()
    s = s[~s.index.duplicated(keep="first")]
    s = s.interpolate(method="time", limit_direction="both")
    return pd.DataFrame({"unique_id": uid, "ds": s.index, "y": s.to_numpy()})


def _statsmodels(sm: Path) -> list[tuple[pd.DataFrame, dict]]:
    out = []
    d = sm / "datasets"
    co2 = pd.read_csv(d / "co2" / "co2.csv")
    out.append((_long("co2_maunaloa", pd.to_datetime(co2["date"].astype(str), format="%Y%m%d"), co2["co2"]),
                dict(source="statsmodels/datasets/co2/co2.csv:co2", domain="climate", frequency="W", licence=_SM)))
    el = pd.read_csv(d / "elnino" / "elnino.csv")
    months = el.columns[1:]
    vals = el[months].to_numpy().ravel()
    ds = pd.date_range(f"{int(el['YEAR'].iloc[0])}-01-01", periods=len(vals), freq="MS")
    out.append((_long("elnino_sst", ds, vals),
                dict(source="statsmodels/datasets/elnino/elnino.csv", domain="climate", frequency="M", licence=_SM)))
    ee = pd.read_csv(d / "elec_equip" / "elec_equip.csv")
    out.append((_long("elec_equip_orders", pd.to_datetime(ee["DATE"], format="%b-%d-%Y"), ee.iloc[:, 1]),
                dict(source="statsmodels/datasets/elec_equip/elec_equip.csv", domain="industry", frequency="M",
                     licence=_SM)))
    ss = pd.read_csv(d / "sunspots" / "sunspots.csv")
    out.append((_long("sunspots_yearly", pd.to_datetime(ss["YEAR"].astype(int).astype(str), format="%Y"),
                      ss["SUNACTIVITY"]),
                dict(source="statsmodels/datasets/sunspots/sunspots.csv", domain="astronomy", frequency="Y",
                     licence=_SM)))
    mac = pd.read_csv(d / "macrodata" / "macrodata.csv")
    qds = pd.PeriodIndex.from_fields(year=mac["year"].astype(int), quarter=mac["quarter"].astype(int),
                                     freq="Q").to_timestamp()
    for col in mac.columns[2:]:
        out.append((_long(f"us_macro_{col}", qds, mac[col]),
                    dict(source=f"statsmodels/datasets/macrodata/macrodata.csv:{col}", domain="macroeconomics",
                         frequency="Q", licence=_SM + "; US public-domain statistics")))
    return out


def _vega(vg: Path) -> list[tuple[pd.DataFrame, dict]]:
    out = []
    d = vg / "_data"
    for fname, uid in (("sf-temps.csv", "sf_temp_hourly"), ("seattle-temps.csv", "seattle_temp_hourly")):
        t = pd.read_csv(d / fname)
        out.append((_long(uid, pd.to_datetime(t["date"], format="mixed"), t["temp"]),
                    dict(source=f"vega_datasets/_data/{fname}:temp", domain="weather", frequency="H",
                         licence=_VEGA)))
    w = pd.read_csv(d / "seattle-weather.csv")
    for col in ("precipitation", "temp_max", "temp_min", "wind"):
        out.append((_long(f"seattle_{col}_daily", pd.to_datetime(w["date"], format="%Y/%m/%d"), w[col]),
                    dict(source=f"vega_datasets/_data/seattle-weather.csv:{col}", domain="weather", frequency="D",
                         licence=_VEGA)))
    emp = pd.read_csv(d / "us-employment.csv")
    for col in emp.columns[1:]:
        out.append((_long(f"us_employment_{col}", pd.to_datetime(emp["month"]), emp[col]),
                    dict(source=f"vega_datasets/_data/us-employment.csv:{col}", domain="labour",
                         frequency="M", licence=_VEGA + "; US BLS public domain")))
    st = pd.read_csv(d / "stocks.csv")
    for sym, g in st.groupby("symbol", sort=True):
        if len(g) < 120:  # GOOG starts in 2004: too short for a context + held-out tail
            continue
        out.append((_long(f"stock_{sym}", pd.to_datetime(g["date"], format="%b %d %Y"), g["price"]),
                    dict(source=f"vega_datasets/_data/stocks.csv:{sym}", domain="finance", frequency="M",
                         licence=_VEGA)))
    return out


def _statsmodels_extra(sm: Path) -> list[tuple[pd.DataFrame, dict]]:
    """Series of the extended collection beyond the default one (statsmodels only)."""
    out = []
    d = sm / "datasets"
    nile = pd.read_csv(d / "nile" / "nile.csv")
    out.append((_long("nile_volume", pd.to_datetime(nile["year"].astype(int).astype(str), format="%Y"), nile["volume"]),
                dict(source="statsmodels/datasets/nile/nile.csv:volume", domain="hydrology", frequency="Y",
                     licence=_SM)))
    dk = pd.read_csv(d / "danish_data" / "data.csv", encoding="utf-8-sig")
    dk_ds = pd.PeriodIndex(dk["period"], freq="Q").to_timestamp()
    for col in ("lrm", "lry", "lpy", "ibo", "ide"):
        out.append((_long(f"danish_{col}", dk_ds, dk[col]),
                    dict(source=f"statsmodels/datasets/danish_data/data.csv:{col}", domain="macroeconomics",
                         frequency="Q", licence=_SM)))
    e6 = pd.read_csv(d / "interest_inflation" / "E6.csv")
    e6_ds = pd.PeriodIndex.from_fields(year=e6["year"].astype(int), quarter=e6["quarter"].astype(int),
                                       freq="Q").to_timestamp()
    for col in ("Dp", "R"):
        out.append((_long(f"german_{col.lower()}", e6_ds, e6[col]),
                    dict(source=f"statsmodels/datasets/interest_inflation/E6.csv:{col}", domain="macroeconomics",
                         frequency="Q", licence=_SM)))
    fe = pd.read_csv(d / "fertility" / "fertility.csv")
    years = [c for c in fe.columns if c.isdigit()]
    rows = fe.dropna(subset=years, thresh=len(years) - 2).sort_values("Country Code")
    for _, r in rows.iloc[::FERTILITY_EVERY].iterrows():  # a sample of countries, not ~200 near-identical curves
        vals = r[years].to_numpy(dtype="float64")
        out.append((_long(f"fertility_{r['Country Code']}", pd.to_datetime(years, format="%Y"), vals),
                    dict(source=f"statsmodels/datasets/fertility/fertility.csv:{r['Country Code']}",
                         domain="demography", frequency="Y",
                         licence=_SM + "; World Bank WDI (CC-BY-4.0)")))
    return out


FERTILITY_EVERY = 5  # every 5th country (by ISO code) of the fertility table


def _assemble(parts: list[tuple[pd.DataFrame, dict]], name: str) -> tuple[pd.DataFrame, tuple[SeriesInfo, ...]]:
    frames, infos = [], []
    for frame, meta in parts:
        uid = frame["unique_id"].iloc[0]
        frames.append(frame)
        infos.append(SeriesInfo(unique_id=uid, length=len(frame), season=SEASON[meta["frequency"]], **meta))
    df = validate_long_format(pd.concat(frames, ignore_index=True), source=name)
    return df, tuple(sorted(infos, key=lambda i: i.unique_id))


@lru_cache(maxsize=1)
def _build_extended() -> tuple[pd.DataFrame, tuple[SeriesInfo, ...]]:
    base_df, base_infos = _build()
    extra_df, extra_infos = _assemble(_statsmodels_extra(_pkg_dir("statsmodels")), "extended collection")
    df = pd.concat([base_df, extra_df], ignore_index=True)
    return df, tuple(sorted(base_infos + extra_infos, key=lambda i: i.unique_id))


def extended_collection() -> pd.DataFrame:
    """The larger real collection of the zero-shot recipes: the default collection plus more series
    statsmodels ships (Nile flow, Danish money demand, German interest and inflation, fertility of
    every 5th country; see :func:`extended_manifest`). A fresh copy each call.

    Raises:
        DataError: statsmodels or vega_datasets is not installed.
    """
    return _build_extended()[0].copy()


def extended_manifest() -> list[SeriesInfo]:
    """The manifest rows of :func:`extended_collection`, sorted by ``unique_id``."""
    return list(_build_extended()[1])


@lru_cache(maxsize=1)
def _build() -> tuple[pd.DataFrame, tuple[SeriesInfo, ...]]:
    parts = _statsmodels(_pkg_dir("statsmodels")) + _vega(_pkg_dir("vega_datasets"))
    return _assemble(parts, "default collection")


def default_collection() -> pd.DataFrame:
    """The default collection in long format (49 real series, 7 domains; see :data:`MANIFEST`).

    Returns a fresh copy each call (columns ``unique_id``, ``ds`` datetime64[ns], ``y`` float64).

    Raises:
        DataError: statsmodels or vega_datasets is not installed.
    """
    return _build()[0].copy()


def manifest() -> list[SeriesInfo]:
    """The manifest rows of :func:`default_collection`, sorted by ``unique_id``."""
    return list(_build()[1])


def seasonality(unique_ids) -> dict[str, int]:
    """Seasonal period per series of the default or extended collection (1 for series it does not
    know, e.g. synthetic ones)."""
    known = {i.unique_id: i.season for i in manifest()}
    if any(u not in known for u in unique_ids):
        known.update({i.unique_id: i.season for i in extended_manifest()})
    return {u: known.get(u, 1) for u in unique_ids}


def manifest_frame() -> pd.DataFrame:
    """:func:`manifest` as a DataFrame."""
    return pd.DataFrame([asdict(i) for i in manifest()])


class _LazyManifest:
    """``MANIFEST``: the manifest rows, built on first use (reading the files takes ~1 s)."""

    def __iter__(self):
        return iter(manifest())

    def __len__(self) -> int:
        return len(manifest())

    def __getitem__(self, i):
        return manifest()[i]


MANIFEST = _LazyManifest()
