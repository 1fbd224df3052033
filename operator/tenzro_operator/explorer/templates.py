"""The explorer's Jinja2 templates (`html` renders them with autoescaping on).

Kept as strings in a module so they ship with the package without package-data settings. No
template marks anything ``|safe``; ``p`` is the page dict of `tenzro_operator.explorer.views`.
"""

BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{% if refresh_s %}<meta http-equiv="refresh" content="{{ refresh_s }}">{% endif %}
<title>{{ title }} · tenzro explorer</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px 40px;color:#1d2330}
header{display:flex;gap:16px;align-items:baseline;border-bottom:1px solid #d8dce4;padding:10px 0;margin-bottom:8px}
header a{font-weight:600;text-decoration:none;color:#1d2330}
h1{font-size:20px;margin:14px 0 4px;word-break:break-all} h2{font-size:16px;margin:22px 0 6px}
table{border-collapse:collapse;width:100%;margin:4px 0} th,td{border-bottom:1px solid #e6e8ee;padding:4px 6px;
text-align:left;vertical-align:top} th{background:#f4f5f8;font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums} .mono{font-family:ui-monospace,monospace;
font-size:12px;word-break:break-all} .muted{color:#6b7385} .note{background:#fff6e0;border:1px solid #f0d48a;
padding:6px 10px;margin:8px 0} .bad{color:#b3261e;font-weight:600} .good{color:#1b7f3b;font-weight:600}
.status{display:inline-block;padding:1px 7px;border-radius:9px;background:#e8ecf5;font-size:12px}
footer{margin-top:28px;color:#6b7385;font-size:12px} svg{background:#fafbfc;border:1px solid #e6e8ee}
</style></head><body>
<header><a href="/">tenzro explorer</a><span class="muted">read-only · chain + IPFS</span></header>
{% block body %}{% endblock %}
<footer>{% if api %}JSON: <a href="{{ api }}">{{ api }}</a> · {% endif %}{% if refresh_s %}refreshes every
{{ refresh_s }} s · {% endif %}amounts in TNZO (exact atto-units in the JSON) · times UTC</footer>
</body></html>
"""

RUNS = """{% extends "base.html" %}{% block body %}
<h1>Runs</h1>
<p class="muted">{{ p.total }} run(s) on chain {{ p.chain_id }} ({{ p.rpc_url }}), registry
<span class="mono">{{ p.registry }}</span>; showing {{ p.offset + 1 if p.runs else 0 }}–{{ p.offset + p.runs|length }}.</p>
{% if p.ipfs_error %}<div class="note">Run names need the specs on IPFS: {{ p.ipfs_error }}</div>{% endif %}
<table><tr><th>task</th><th>status</th><th class="n">round</th><th class="n">trainers</th><th class="n">M</th>
<th class="n">K</th><th class="n">F</th><th>rule</th><th class="n">pool</th><th>syncer</th><th>posted</th></tr>
{% for r in p.runs %}<tr>
<td><a href="/runs/{{ r.task_id }}">{{ r.name | dash }}</a><div class="mono muted">{{ r.task_id }}</div></td>
<td><span class="status">{{ r.status }}</span></td><td class="n">{{ r.current_round }}/{{ r.max_rounds }}</td>
<td class="n">{{ r.enrolled_count }}</td><td class="n">{{ r.trainer_count }}</td><td class="n">{{ r.quorum }}</td>
<td class="n">{{ r.fragment_count }}</td><td>{{ r.aggregation }}</td><td class="n">{{ r.reward_pool | tokens }}</td>
<td class="mono">{{ r.syncer }}</td><td>{{ r.posted_at_iso | dash }}</td></tr>
{% else %}<tr><td colspan="11" class="muted">no runs posted yet (`tenzro train post-task`)</td></tr>{% endfor %}
</table>
{% if p.offset > 0 %}<a href="/?offset={{ [p.offset - p.limit, 0] | max }}&amp;limit={{ p.limit }}">« previous</a>{% endif %}
{% if p.offset + p.runs|length < p.total %}<a href="/?offset={{ p.offset + p.limit }}&amp;limit={{ p.limit }}">next »</a>{% endif %}
{% endblock %}
"""

RUN = """{% extends "base.html" %}{% block body %}
{% set run = p.run %}
<h1>{{ p.name | dash }} <span class="status">{{ run.status }}</span></h1>
<div class="mono muted">{{ p.task_id }}</div>
{% if p.spec_error %}<div class="note">{{ p.spec_error }}</div>{% endif %}
<h2>Run</h2>
<table>
<tr><th>round</th><td>{{ run.current_round }} of {{ run.max_rounds }}{% if run.status == "TRAINING" %}, deadline
{{ run.round_deadline_iso | dash }}{% endif %}</td><th>trainers (enrolled / M)</th><td>{{ run.enrolled_count }} /
{{ run.trainer_count }}</td></tr>
<tr><th>quorum K</th><td>{{ run.quorum }}</td><th>fragments F</th><td>{{ run.fragment_count }}</td></tr>
<tr><th>inner steps H</th><td>{{ run.inner_steps }}</td><th>grace window</th><td>{{ run.grace_window_seconds }} s</td></tr>
<tr><th>aggregation</th><td colspan="3">{{ run.aggregation }}</td></tr>
<tr><th>reward pool</th><td>{{ run.reward_pool | tokens }} ({{ run.reward_pool_left | tokens }} left)</td>
<th>min stake</th><td>{{ run.min_stake | tokens }}</td></tr>
<tr><th>sponsor</th><td class="mono">{{ run.sponsor }}</td><th>syncer</th><td class="mono">{{ run.syncer }}</td></tr>
<tr><th>syncer fee</th><td>{{ run.syncer_fee_bps }} bps ({{ run.syncer_fees_accrued | tokens }} accrued)</td>
<th>syncer bond</th><td>{{ run.syncer_bond | tokens }}</td></tr>
<tr><th>posted</th><td>{{ run.posted_at_iso | dash }}</td><th>enrollment deadline</th><td>{{ run.enrollment_deadline_iso | dash }}</td></tr>
<tr><th>phase</th><td colspan="3">{{ p.phase }}{% if p.next_change %}: {{ p.next_change }}{% if
p.next_change_at_iso %} at {{ p.next_change_at_iso }}{% endif %}{% endif %}</td></tr>
{% if p.claimable_pool is not none %}<tr><th>claimable pool</th><td>{{ p.claimable_pool | tokens }} ({{ p.claimed_total
| tokens }} claimed)</td><th>claims close</th><td>{{ p.claim_deadline_iso | dash }}</td></tr>{% endif %}
<tr><th>weights root</th><td class="mono" colspan="3">{{ run.weights_root }}</td></tr>
<tr><th>spec</th><td class="mono" colspan="3">ipfs://{{ p.spec_cid }} (sha256 {{ run.spec_hash }})</td></tr>
</table>

<h2>Trainers</h2>
<table><tr><th class="n">#</th><th>trainer</th><th class="n">submitted</th><th class="n">accepted</th>
<th class="n">stake</th><th class="n">slashed</th><th class="n">credits</th>
<th class="n">reward</th><th>state</th><th class="n">scored out</th><th class="n">claimed</th></tr>
{% for t in p.trainers %}<tr><td class="n">{{ t.index }}</td><td><span class="mono">{{ t.trainer }}</span>
<div class="muted mono">{{ t.did }}</div></td><td class="n">{{ t.submitted | dash }}</td><td class="n">{{ t.accepted }}</td>
<td class="n">{{ t.stake | tokens }}</td>
<td class="n{% if t.slashed != '0' %} bad{% endif %}">{{ t.slashed | tokens }}</td><td class="n">{{ t.credits }}</td>
<td class="n">{{ t.current_reward | tokens }}</td><td>{{ "enrolled" if t.enrolled else "—" }}</td>
<td class="n">{{ t.scored_out | dash }}{% for x in t.scored_out_reasons %}<div class="muted">r{{ x.round }} f{{ x.fragment }}:
{{ x.reason }}</div>{% endfor %}</td><td class="n">{{ t.claimed_reward | tokens if t.claimed else "—" }}</td></tr>
{% else %}<tr><td colspan="11" class="muted">nobody enrolled yet</td></tr>{% endfor %}
</table>

<h2>Rounds</h2>
{% if chart %}<svg width="{{ chart.w }}" height="{{ chart.h }}" role="img" aria-label="held-out loss by round">
<text x="4" y="14" font-size="11">held-out loss {{ "%.4f" | format(chart.hi) }}</text>
<text x="4" y="{{ chart.h - 6 }}" font-size="11">{{ "%.4f" | format(chart.lo) }}</text>
<polyline fill="none" stroke="#3559c7" stroke-width="2" points="{{ chart.points }}"/>
{% for d in chart.dots %}<circle cx="{{ d.x }}" cy="{{ d.y }}" r="3" fill="#3559c7"><title>{{ "initial" if d.round < 0
else "round " ~ d.round }}: {{ "%.5f" | format(d.loss) }}</title></circle>{% endfor %}</svg>{% endif %}
<table><tr><th class="n">round</th><th>opened</th><th>finalized</th><th class="n">seconds</th><th class="n">accepted</th>
<th>quorum</th><th class="n">held-out loss</th><th>weights root</th><th>transcript</th></tr>
{% for r in p.rounds %}<tr><td class="n">{{ r.round }}</td><td>{{ r.opened_at_iso | dash }}</td>
<td>{{ r.finalized_at_iso | dash if r.finalized else r.status }}{% if r.challenge_window_ends_at_iso %}<div
class="muted">challenge window until {{ r.challenge_window_ends_at_iso }}</div>{% endif %}{% for w in r.proven_wrong
%}<div class="bad">proven wrong ({{ w.kind_name }})</div>{% endfor %}</td><td class="n">{{ r.seconds | dash }}</td>
<td class="n">{{ r.accepted_count | dash }}</td><td>{{ r.quorum_met | dash }}</td>
<td class="n">{{ "%.5f" | format(r.heldout_loss) if r.heldout_loss is not none else "—" }}</td>
<td class="mono">{{ r.weights_root | dash }}</td>
<td>{% if r.finalized %}<a href="/runs/{{ p.task_id }}/rounds/{{ r.round }}">transcript</a>
<div class="mono muted">{{ r.transcript_cid }}</div>{% else %}—{% endif %}</td></tr>
{% else %}<tr><td colspan="9" class="muted">no round opened yet</td></tr>{% endfor %}
</table>
{% if not chart %}<p class="muted">Held-out loss is measured by the syncer: start the explorer with
--syncer-rounds DATA_DIR/syncer-rounds.jsonl to show it.</p>{% endif %}

<h2>Slashes and challenges</h2>
<table><tr><th>event</th><th class="n">block</th><th>details</th></tr>
{% for e in p.evidence %}<tr><td class="bad">{{ e.event }}</td><td class="n">{{ e.block }}</td><td class="mono">
{% for k, v in e.args.items() if k != "taskId" %}{{ k }}={{ v }}{{ ", " if not loop.last }}{% endfor %}</td></tr>
{% else %}<tr><td colspan="3" class="muted">none</td></tr>{% endfor %}
</table>

<h2>Receipt</h2>
{% if p.receipt %}{% set rc = p.receipt %}
<table>
<tr><th>verifier {{ rc.verifier }}</th><td>{% if rc.verifier_accepts %}<span class="good">accepts the receipt (0x01)</span>
{% elif rc.verifier_accepts is none %}<span class="bad">could not be asked: {{ rc.verifier_error }}</span>
{% else %}<span class="bad">rejects the receipt</span>{% endif %}</td></tr>
<tr><th>run root</th><td class="mono">{{ rc.run_root }}</td></tr>
<tr><th>final model hash</th><td class="mono">{{ rc.final_model_hash }}</td></tr>
<tr><th>transcript root</th><td class="mono">{{ rc.transcript_root }}</td></tr>
<tr><th>spec hash</th><td class="mono">{{ rc.spec_hash }}</td></tr>
<tr><th>rounds / trainers</th><td>{{ rc.rounds }} / {{ rc.trainer_count }}</td></tr>
<tr><th>sealed</th><td>{{ rc.sealed_at_iso | dash }}</td></tr>
</table>
<p class="muted">Replay check (fetches every transcript and payload): <span class="mono">tenzro train verify-receipt
--task-id {{ p.task_id }}</span></p>
{% else %}<p class="muted">not sealed yet ({{ run.status }})</p>{% endif %}

<h2>Events <span class="muted">({{ p.events_total }}, newest first, up to 100 here)</span></h2>
<table><tr><th class="n">block</th><th>event</th><th>details</th></tr>
{% for e in (p.events | reverse | list)[:100] %}<tr><td class="n">{{ e.block }}</td><td>{{ e.event }}</td><td class="mono">
{% for k, v in e.args.items() if k not in ("taskId", "commit", "params") %}{{ k }}={{ v }}{{ ", " if not loop.last }}{% endfor %}</td></tr>
{% endfor %}</table>

{% if p.spec_fields %}<h2>Spec</h2>
<table>{% for k, v in p.spec_fields %}<tr><th>{{ k }}</th><td class="mono">{{ v }}</td></tr>{% endfor %}</table>{% endif %}
{% endblock %}
"""

ROUND = """{% extends "base.html" %}{% block body %}
<h1>Round {{ p.round }}</h1>
<div><a href="/runs/{{ p.task_id }}">« run <span class="mono">{{ p.task_id }}</span></a></div>
<table>
<tr><th>accepted</th><td>{{ p.accepted_count }} (quorum met: {{ p.quorum_met }})</td></tr>
<tr><th>weights root</th><td class="mono">{{ p.weights_root }}</td></tr>
<tr><th>transcript</th><td class="mono">ipfs://{{ p.transcript_cid }} (sha256 {{ p.transcript_hash }})</td></tr>
<tr><th>transaction</th><td class="mono">{{ p.tx }}</td></tr>
<tr><th>committed</th><td>{{ p.committed_at_iso | dash }}{% if p.challenge_window_ends_at_iso %}, challenge window
until {{ p.challenge_window_ends_at_iso }}{% endif %}</td></tr>
{% for w in p.proven_wrong %}<tr><th class="bad">proven wrong</th><td>{{ w.kind_name }} (fragment {{ w.fragment }},
position {{ w.position }}) by <span class="mono">{{ w.prover }}</span></td></tr>{% endfor %}
{% for c in p.challenges %}<tr><th>slot challenge</th><td>fragment {{ c.fragment }}, trainer #{{ c.index }}:
{{ c.outcome }}</td></tr>{% endfor %}
</table>
{% if p.transcript_error %}<div class="note bad">{{ p.transcript_error }}</div>{% endif %}
{% if p.transcript %}{% set t = p.transcript %}
<p>rule {{ t.rule.name }} · outer lr {{ t.outer.lr }}, momentum {{ t.outer.momentum }} · input weights root
<span class="mono">{{ t.input_weights_root }}</span></p>
<table><tr><th class="n">fragment</th><th>accepted</th><th>rejected</th><th>new weights</th></tr>
{% for f in t.fragments %}<tr><td class="n">{{ f.fragment }}</td>
<td class="mono">{% for s in f.accepted %}<div>{{ s.trainer }}</div>{% else %}—{% endfor %}</td>
<td class="mono">{% for s in f.rejected %}<div class="bad">{{ s.trainer }}: {{ s.reason }}</div><div class="muted">{{ s.detail }}</div>
{% else %}—{% endfor %}</td><td class="mono">{{ f.weights.cid }}{% if not f.aggregated %} (carried over){% endif %}</td></tr>
{% endfor %}</table>{% endif %}
{% endblock %}
"""

ERROR = """{% extends "base.html" %}{% block body %}
<h1>{{ p.status }}</h1>
<p class="bad">{{ p.message }}</p>
{% if p.hint %}<p>{{ p.hint }}</p>{% endif %}
<p><a href="/">all runs</a></p>
{% endblock %}
"""

TEMPLATES = {"base.html": BASE, "runs.html": RUNS, "run.html": RUN, "round.html": ROUND, "error.html": ERROR}
