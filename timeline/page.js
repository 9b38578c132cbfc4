// The page's script: renders the data embedded in #acptap-data. No
// network, no libraries: the page must work from disk and as a CI
// artifact.
(function () {
  'use strict';
  window.acptapStartMs = performance.now();
  var D = JSON.parse(document.getElementById('acptap-data').textContent);
  var E = D.events || [];
  var G = D.groups || [];
  var T = D.tools || [];
  var TURNS = D.turns || [];
  var LANES = ['editor', 'agent', 'llm', 'stderr'];
  // The MCP servers' lines, when the agent had any, have a column of
  // their own.
  function mcpLane() {
    if (LANES.indexOf('mcp') < 0 && E.some(function (e) { return e.lane === 'mcp'; })) {
      LANES.push('mcp');
      document.body.classList.add('mcp');
      return true;
    }
    return false;
  }
  mcpLane();
  var H = 22; // the height of a row, px: rows are laid out by index
  // bySeq is the index in E of each event's sequence number.
  var bySeq = {};
  function indexSeqs() { bySeq = {}; E.forEach(function (e, i) { bySeq[e.seq] = i; }); }
  indexSeqs();

  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c];
    });
  }
  function h(tag, attrs, html) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === 'class') e.className = attrs[k]; else e.setAttribute(k, attrs[k]);
    }
    if (html !== undefined) e.innerHTML = html;
    return e;
  }
  function pretty(v) { return JSON.stringify(v, null, 2); }
  function parse(s) { try { return {ok: true, v: JSON.parse(s)}; } catch (e) { return {ok: false}; } }
  function fmtT(ms) { return '+' + (ms / 1000).toFixed(3) + 's'; }

  // JSON rendered with the values at some paths marked; paths are in the
  // syntax of acptap's normalize package: $, .key or ["key"], [index].
  function keyPath(k) { return /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? '.' + k : '[' + JSON.stringify(k) + ']'; }
  function jsonHTML(v, marks, path, ind) {
    var out = jsonInner(v, marks, path, ind);
    return marks && marks[path] ? '<mark class="diff">' + out + '</mark>' : out;
  }
  function jsonInner(v, marks, path, ind) {
    var pad = '  '.repeat(ind + 1), end = '  '.repeat(ind);
    if (Array.isArray(v)) {
      if (!v.length) return '[]';
      return '[\n' + v.map(function (x, i) { return pad + jsonHTML(x, marks, path + '[' + i + ']', ind + 1); }).join(',\n') + '\n' + end + ']';
    }
    if (v && typeof v === 'object') {
      var ks = Object.keys(v);
      if (!ks.length) return '{}';
      return '{\n' + ks.map(function (k) { return pad + esc(JSON.stringify(k)) + ': ' + jsonHTML(v[k], marks, path + keyPath(k), ind + 1); }).join(',\n') + '\n' + end + '}';
    }
    return esc(JSON.stringify(v));
  }
  function markSet(paths) { var m = {}; (paths || []).forEach(function (p) { m[p] = true; }); return m; }

  // ---- header and tabs
  var app = document.getElementById('app');
  var header = h('header'), liveNote = '';
  function renderHeader() {
    header.innerHTML = '';
    header.appendChild(h('h1', {}, (D.status ? '<span class="status ' + esc(D.status) + '">' + esc(D.status) + '</span>' : '') + esc(D.title)));
    (D.info || []).forEach(function (l) { header.appendChild(h('p', {class: 'info'}, esc(l))); });
    if (D.problems && D.problems.length) header.appendChild(h('ul', {class: 'problems', id: 'problems'}, D.problems.map(function (p) { return '<li>' + esc(p) + '</li>'; }).join('')));
    if (D.warnings && D.warnings.length) header.appendChild(h('ul', {class: 'warnings'}, D.warnings.map(function (p) { return '<li>warning: ' + esc(p) + '</li>'; }).join('')));
    if (liveNote) header.appendChild(h('p', {class: 'live', id: 'live-status'}, esc(liveNote)));
  }
  renderHeader();
  app.appendChild(header);
  var nav = h('nav', {class: 'tabs'});
  var main = h('main');
  app.appendChild(nav);
  app.appendChild(main);
  var views = {};
  function tab(name, label) {
    var b = h('button', {id: 'tab-' + name}, esc(label));
    b.onclick = function () { show(name); };
    nav.appendChild(b);
    views[name] = {button: b, el: main.appendChild(h('div', {class: 'view', id: 'view-' + name}))};
    return views[name].el;
  }
  var shown = null, onShow = {};
  function show(name) {
    for (var k in views) { views[k].button.classList.toggle('on', k === name); views[k].el.classList.toggle('on', k === name); }
    shown = name;
    if (onShow[name]) onShow[name]();
  }

  // ---- the sequence view
  var state = {lanes: {editor: true, agent: true, llm: true, stderr: true}, kind: 'all', text: '', open: {}, sel: -1, rel: {}, session: 0};
  var rows = [];
  var list, spacer, detail, countEl;
  var hay = null; // lower-cased text of each event, made on the first text filter

  function laneLabel(l) { return {editor: 'editor → agent', agent: 'agent → editor', llm: 'LLM', stderr: 'stderr', mcp: 'MCP servers'}[l]; }

  var toolbar, laneBoxes, kindSel, sessionSel, colsEl;
  function laneBox(l) {
    var lab = h('label', {}, '<input type="checkbox" checked id="lane-' + l + '"> ' + esc(l));
    lab.querySelector('input').onchange = function (ev) { state.lanes[l] = ev.target.checked; refilter(); };
    laneBoxes.appendChild(lab);
    state.lanes[l] = true;
  }
  // fillKinds lists the kinds of the events, each update kind seen
  // included, keeping the choice.
  function fillKinds() {
    var kinds = [['all', 'every kind'], ['request', 'requests'], ['notification', 'notifications'], ['response', 'responses'], ['err', 'errors'], ['junk', 'junk'], ['exchange', 'LLM exchanges']];
    var seen = {};
    E.forEach(function (e) { if (e.update) seen[e.update] = true; });
    Object.keys(seen).sort().forEach(function (u) { kinds.push(['update:' + u, 'update ' + u]); });
    // A replay's page with injected faults picks their rows.
    if (E.some(faultOf)) kinds.push(['fault', 'injected faults']);
    if (kindSel.options.length === kinds.length) return;
    kindSel.innerHTML = kinds.map(function (k) { return '<option value="' + esc(k[0]) + '">' + esc(k[1]) + '</option>'; }).join('');
    kindSel.value = state.kind;
  }
  // fillSessions lists the sessions, once there are two.
  function fillSessions() {
    if (!(D.sessions > 1) || (sessionSel && sessionSel.options.length === D.sessions + 1)) return;
    var sessions = [['0', 'every session']];
    for (var n = 1; n <= D.sessions; n++) sessions.push([String(n), 'session ' + n]);
    if (!sessionSel) {
      sessionSel = h('select', {id: 'session'});
      sessionSel.onchange = function () { state.session = +sessionSel.value; refilter(); };
      toolbar.insertBefore(sessionSel, kindSel.nextSibling);
    }
    sessionSel.innerHTML = sessions.map(function (k) { return '<option value="' + k[0] + '">' + k[1] + '</option>'; }).join('');
    sessionSel.value = String(state.session);
  }
  function colsHTML() {
    return '<span>seq</span><span>' + (D.timed ? 'time' : 'step') + '</span><span>' + (D.sessions > 1 ? 'session' : 'turn') + '</span>' +
      LANES.map(function (l) { return '<span class="l-' + l + '">' + laneLabel(l) + '</span>'; }).join('');
  }

  function buildTimeline(root) {
    var bar = toolbar = root.appendChild(h('div', {class: 'toolbar'}));
    laneBoxes = bar.appendChild(h('span', {class: 'lanes'}));
    LANES.forEach(laneBox);
    kindSel = bar.appendChild(h('select', {id: 'kind'}));
    kindSel.onchange = function () { state.kind = kindSel.value; refilter(); };
    fillKinds();
    fillSessions();
    var q = h('input', {type: 'search', id: 'filter', placeholder: 'search rows and LLM bodies'});
    var timer = 0;
    // Typing waits for a pause; clearing the filter is at once.
    q.oninput = function () {
      clearTimeout(timer);
      var apply = function () { state.text = q.value.toLowerCase(); refilter(); };
      if (q.value === '') apply(); else timer = setTimeout(apply, 120);
    };
    bar.appendChild(q);
    var next = h('button', {id: 'next-error'}, 'next error');
    next.onclick = nextError;
    bar.appendChild(next);
    countEl = bar.appendChild(h('span', {class: 'count', id: 'count'}));

    var split = root.appendChild(h('div', {class: 'split'}));
    var seq = split.appendChild(h('div', {class: 'seq'}));
    colsEl = seq.appendChild(h('div', {class: 'cols'}, colsHTML()));
    list = seq.appendChild(h('div', {id: 'list'}));
    spacer = list.appendChild(h('div', {id: 'spacer'}));
    detail = split.appendChild(h('div', {id: 'detail'}, '<p class="empty">Click a row to see it whole.</p>'));
    var pending = false;
    list.addEventListener('scroll', function () {
      if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; render(); }); }
    });
    window.addEventListener('resize', render);
    spacer.addEventListener('click', function (ev) {
      var r = ev.target.closest('.row');
      if (r) click(+r.dataset.r);
    });
    onShow.timeline = render;
    refilter();
  }

  function matches(i) {
    var e = E[i];
    if (!state.lanes[e.lane]) return false;
    if (state.session && e.session !== state.session) return false;
    var k = state.kind;
    if (k === 'err' ? !e.err : k === 'fault' ? !faultOf(e) : k.indexOf('update:') === 0 ? e.update !== k.slice(7) : k !== 'all' && e.kind !== k) return false;
    if (state.text) {
      if (!hay) hay = E.map(haystack);
      return hay[i].indexOf(state.text) >= 0;
    }
    return true;
  }

  // faultOf is the fault a replay injected into event e: an LLM
  // exchange's answer (replay --fault) or an editor frame (replay
  // --stdio-fault); '' for none.
  function faultOf(e) { return e.fault || (e.exchange && e.exchange.fault) || ''; }

  // haystack is the text the filter searches in event e, lower-cased:
  // its row, its line, and of an exchange its request and response
  // bodies and what the answer says. JSON is searched decoded too, so
  // that a quote, a line break or an accented letter that JSON escapes
  // is found as typed.
  function haystack(e) {
    var parts = [e.method || '', e.update || '', e.summary || '', withDecoded(e.raw || '')];
    if (e.fault) parts.push('injected fault ' + e.fault);
    var x = e.exchange;
    if (x) {
      parts.push(x.url, bodyText(x.request_body) ? withDecoded(bodyText(x.request_body)) : '');
      var m = x.message;
      if (m) {
        parts.push(m.text || '', m.reasoning || '');
        (m.tool_calls || []).forEach(function (tc) { parts.push(tc.name, withDecoded(tc.arguments || '')); });
        (m.errors || []).forEach(function (er) { parts.push(er); });
      }
      parts.push((x.chunks || []).map(function (c) { return typeof c.data === 'string' ? c.data : ''; }).join(''));
      if (x.error) parts.push(x.error);
      if (x.fault) parts.push('injected fault ' + x.fault);
    }
    return parts.join('\n').toLowerCase();
  }
  // withDecoded is s, and if s is JSON with escapes, the strings in it
  // unescaped.
  function withDecoded(s) {
    if (s.indexOf('\\') < 0) return s;
    var p = parse(s);
    if (!p.ok || typeof p.v !== 'object' || p.v === null) return s;
    var out = [s];
    (function walk(v) {
      if (typeof v === 'string') out.push(v);
      else if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') for (var k in v) walk(v[k]);
    })(p.v);
    return out.join('\n');
  }

  // rows lists what the list shows: an event, or a group of chunks
  // (collapsed, or followed by its chunks when open).
  function refilter() {
    rows = [];
    for (var i = 0; i < E.length; i++) {
      var e = E[i];
      if (e.group) {
        var g = G[e.group - 1];
        if (g.events[0] !== i) continue;
        var members = g.events.filter(matches);
        if (!members.length && !(state.text && state.lanes.agent && g.text.toLowerCase().indexOf(state.text) >= 0 && matchesKind(e))) continue;
        rows.push({i: i, g: e.group - 1});
        if (state.open[e.group - 1]) members.forEach(function (m) { rows.push({i: m, g: -1, child: true}); });
        continue;
      }
      if (matches(i)) rows.push({i: i, g: -1});
    }
    countEl.textContent = rows.length + ' rows of ' + E.length + ' events';
    render();
  }
  function matchesKind(e) { var k = state.kind; return k === 'all' || e.kind === k || k === 'update:' + e.update || k === 'fault' && !!faultOf(e); }

  function render() {
    if (!list) return;
    spacer.style.height = rows.length * H + 'px';
    // Never more than a window's height of rows, whatever the layout.
    var top = list.scrollTop, height = Math.min(list.clientHeight || 600, window.innerHeight || 1000);
    var first = Math.max(0, Math.floor(top / H) - 15), last = Math.min(rows.length, Math.ceil((top + height) / H) + 15);
    var html = [];
    for (var r = first; r < last; r++) html.push(rowHTML(r));
    spacer.innerHTML = html.join('');
  }

  function rowHTML(r) {
    var row = rows[r], e = E[row.i];
    var cls = 'row lane-' + e.lane + (e.err ? ' err' : '') + (row.child ? ' child' : '') + (state.sel === row.i && (row.g >= 0) === !!state.selGroup ? ' sel' : '') + (state.rel[row.i] ? ' rel' : '');
    // The content starts in its lane's column and runs on to the right
    // edge: a sequence view, with nothing cut at a column's width.
    // A row cut at the edge says itself whole as its tooltip.
    var cells = '<span class="c" style="grid-column:' + (4 + LANES.indexOf(e.lane)) + '/-1"' + (row.g < 0 && e.summary ? ' title="' + esc(e.summary) + '"' : '') + '>' + cellHTML(row, e) + '</span>';
    return '<div class="' + cls + '" data-r="' + r + '" data-i="' + row.i + '" data-lane="' + e.lane + '" style="top:' + r * H + 'px">' +
      '<span class="n">' + e.seq + '</span><span class="t">' + (D.timed ? fmtT(e.t) : '#' + (row.i + 1)) + '</span><span class="tn">' + (D.sessions > 1 && e.session ? 's' + e.session + ' ' : '') + (e.turn ? 'T' + e.turn : '') + '</span>' + cells + '</div>';
  }

  function title(e) {
    switch (e.kind) {
      case 'request': return e.method;
      case 'notification': return e.update || e.method;
      case 'response': return 'result ' + e.id;
      case 'error': return 'error ' + e.id;
      case 'junk': return 'junk';
      case 'exchange': return e.exchange && e.exchange.number ? 'llm #' + e.exchange.number : 'llm';
      default: return '';
    }
  }
  function cellHTML(row, e) {
    if (row.g >= 0) {
      var g = G[row.g];
      return '<span class="tag">' + (state.open[row.g] ? '▾' : '▸') + ' ' + g.events.length + ' chunks</span><b>' + esc(g.update) + '</b>' + esc(g.text.replace(/\s+/g, ' ').slice(0, 200));
    }
    var t = title(e), tags = '';
    if (faultOf(e)) tags += '<span class="tag fault">injected fault ' + esc(faultOf(e)) + '</span>';
    // An exchange says which tool call's result it carries and which it
    // asks for: the causal chain reads down the LLM column.
    (e.tools || []).forEach(function (k) {
      var tool = T[k];
      if (tool.result === row.i) tags += '<span class="tag">↩ ' + esc(tool.title || tool.id) + '</span>';
      if (tool.cause === row.i) tags += '<span class="tag">→ ' + esc(tool.title || tool.id) + '</span>';
    });
    return (t ? '<b>' + esc(t) + '</b>' : '') + tags + summaryHTML(e);
  }
  // An exchange's summary is its method, route and status, then what the
  // answer says (text, tool calls), the parts two spaces apart (see
  // exchangeSummary). The row shows the answer first, the row's point,
  // which the LLM column's width would otherwise cut off, and the method,
  // route and status after it, dimmed.
  function summaryHTML(e) {
    var s = e.summary || '';
    if (e.kind !== 'exchange' || e.lane !== 'llm') return esc(s);
    var cut = s.indexOf('  '), route = '<span class="route" title="' + esc(e.exchange ? e.exchange.url : '') + '">' + esc(cut < 0 ? s : s.slice(0, cut)) + '</span>';
    return cut < 0 ? route : '<span class="said">' + esc(s.slice(cut + 2)) + '</span>' + route;
  }

  function click(r) {
    var row = rows[r];
    if (!row) return;
    if (row.g >= 0) {
      state.open[row.g] = !state.open[row.g];
      select(row.i, true);
      refilter();
      return;
    }
    select(row.i, false);
  }

  function related(i) {
    var e = E[i], rel = {};
    if (e.pair) rel[e.pair - 1] = true;
    (e.tools || []).forEach(function (t) { T[t].events.forEach(function (j) { rel[j] = true; }); });
    if (e.turn) {
      var turn = TURNS[e.turn - 1];
      if (i === turn.prompt || i === turn.answer) (turn.llm || []).forEach(function (j) { rel[j] = true; });
      if (e.kind === 'exchange') rel[turn.prompt] = true;
    }
    if (e.group) G[e.group - 1].events.forEach(function (j) { rel[j] = true; });
    delete rel[i];
    return rel;
  }

  function select(i, group) {
    state.sel = i;
    state.selGroup = group;
    state.rel = related(i);
    // The address names the row, so that it can be linked to: the page
    // opens there (see openHash).
    if (history.replaceState && location.hash !== '#seq-' + E[i].seq) {
      try { history.replaceState(null, '', '#seq-' + E[i].seq); } catch (err) { /* a page in a sandboxed frame keeps its address */ }
    }
    render();
    detail.innerHTML = '';
    detail.appendChild(group ? groupDetail(G[E[i].group - 1]) : eventDetail(i));
    detail.scrollTop = 0;
  }

  // jump shows event i: its group opened, the filters cleared if they hide
  // it, scrolled into view and selected.
  function jump(i) {
    var e = E[i];
    if (e.group) state.open[e.group - 1] = true;
    refilter();
    var r = rowOf(i);
    if (r < 0) {
      LANES.forEach(function (l) { state.lanes[l] = true; document.getElementById('lane-' + l).checked = true; });
      state.kind = 'all'; document.getElementById('kind').value = 'all';
      state.text = ''; document.getElementById('filter').value = '';
      refilter();
      r = rowOf(i);
    }
    if (r < 0) return;
    if (r * H < list.scrollTop || (r + 1) * H > list.scrollTop + list.clientHeight) list.scrollTop = Math.max(0, r * H - list.clientHeight / 3);
    select(i, false);
  }
  function rowOf(i) {
    for (var r = 0; r < rows.length; r++) if (rows[r].i === i && rows[r].g < 0) return r;
    return -1;
  }

  function nextError() {
    var from = state.sel;
    for (var r = 0; r < rows.length; r++) {
      var row = rows[r];
      if (row.i > from && E[row.i].err && row.g < 0) { jump(row.i); return; }
    }
    for (var j = from + 1; j < E.length; j++) if (E[j].err) { jump(j); return; }
    countEl.textContent = 'no error after this row';
  }

  // A link names its event by sequence number, which a live page's
  // new events do not change.
  function link(i, text) { return '<a class="jump" data-jump="' + E[i].seq + '">' + esc(text) + '</a>'; }
  function evLabel(j) { var e = E[j]; return '#' + e.seq + ' ' + (e.lane === 'llm' ? '' : e.lane + ' ') + title(e) + (e.summary ? ' ' + e.summary.slice(0, 80) : ''); }
  function wire(el) {
    el.addEventListener('click', function (ev) {
      var a = ev.target.closest('[data-jump]');
      if (a && bySeq[a.dataset.jump] !== undefined) jump(bySeq[a.dataset.jump]);
    });
    return el;
  }

  function linksHTML(i) {
    var e = E[i], out = [];
    if (e.turn) {
      var turn = TURNS[e.turn - 1];
      out.push('<p>turn ' + e.turn + ': ' + link(turn.prompt, 'session/prompt "' + (turn.text || '') + '"') + (turn.answer >= 0 ? ' → ' + link(turn.answer, turn.stop || 'answer') : ' (never answered)') + '</p>');
      if ((i === turn.prompt || i === turn.answer) && turn.llm && turn.llm.length) {
        out.push('<h3>LLM exchanges of the turn</h3><ul class="links">' + turn.llm.map(function (j) { return '<li>' + link(j, evLabel(j)) + '</li>'; }).join('') + '</ul>');
      }
    }
    if (e.pair) out.push('<p>' + (e.kind === 'request' ? 'answered by ' : 'answers ') + link(e.pair - 1, evLabel(e.pair - 1)) + '</p>');
    (e.tools || []).forEach(function (t) {
      var tool = T[t], role = '';
      if (tool.cause === i) role = ' (asked for by this exchange)';
      if (tool.result === i) role = ' (this exchange carries its result)';
      out.push('<h3>tool call ' + esc(tool.title || tool.id) + (tool.status ? ' (' + esc(tool.status) + ')' : '') + esc(role) + '</h3><ul class="links">' +
        tool.events.map(function (j) { return '<li>' + (j === i ? esc(evLabel(j)) + ' (this)' : link(j, evLabel(j))) + '</li>'; }).join('') + '</ul>');
    });
    if (e.group) out.push('<p>' + link(G[e.group - 1].events[0], 'part of a message of ' + G[e.group - 1].events.length + ' chunks') + '</p>');
    return out.join('');
  }

  function eventDetail(i) {
    var e = E[i];
    var d = wire(h('div', {class: 'detail-event', 'data-i': i}));
    d.appendChild(h('h2', {}, '#' + e.seq + ' ' + (e.lane === 'llm' ? '' : esc(e.lane) + ' ') + esc(title(e)) + (D.timed ? ' <span class="info">' + fmtT(e.t) + '</span>' : '')));
    d.appendChild(h('div', {class: 'links'}, linksHTML(i)));
    if (e.exchange) {
      var ex = d.appendChild(h('div', {}, exportHTML(i, e.exchange)));
      var cb = ex.querySelector('button.curl');
      if (cb) cb.onclick = function () { copyText(curlCommand(e.exchange), cb); };
      d.appendChild(exchangeDetail(e.exchange));
      return d;
    }
    if (e.fault) d.appendChild(h('p', {class: 'fault'}, stdioFaultHTML(e.fault)));
    if (e.b64) { d.appendChild(h('p', {}, 'not UTF-8; base64:')); d.appendChild(h('pre', {class: 'json'}, esc(e.raw))); return d; }
    var p = parse(e.raw || '');
    d.appendChild(h('pre', {class: 'json'}, p.ok ? jsonHTML(p.v, null, '$', 0) : esc(e.raw || '')));
    return d;
  }

  // stdioFaultHTML says what a stdio fault (replay --stdio-fault) did to
  // the editor frame it broke.
  function stdioFaultHTML(f) {
    var arg = f.slice(f.indexOf(':') + 1), what = {
      drop: 'it was not written: the agent never got it, and the replay went on as if it had. Its row stands where the recording had it among the agent\'s lines.',
      dup: 'it was written twice, in one write.',
      delay: 'it was written ' + arg + ' late.',
      split: 'it was written in two writes: its first ' + arg + ' bytes, then, a pause later, the rest.',
      sever: 'its first half was written, without its newline, then the agent\'s stdin was closed, as by an editor that crashes mid-write.',
      garbage: 'it was written after a line that is not JSON, in the same write.',
      close: 'the agent\'s stdin was closed in its place: the agent never got it. Its row stands where the recording had it among the agent\'s lines.'
    }[f.split(':')[0]] || '';
    return 'The replay broke this frame on its way to the agent with an injected stdio fault, <b>' + esc(f) + '</b> (replay --stdio-fault)' + (what ? ': ' + esc(what) : '.') + ' Below is the recorded frame.';
  }

  function groupDetail(g) {
    var d = wire(h('div', {class: 'detail-group'}));
    d.appendChild(h('h2', {}, esc(g.update) + ', ' + g.events.length + ' chunks joined'));
    d.appendChild(h('pre', {class: 'text'}, esc(g.text)));
    d.appendChild(h('h3', {}, 'chunks'));
    d.appendChild(h('ul', {class: 'links'}, g.events.map(function (j) { return '<li>' + link(j, evLabel(j)) + '</li>'; }).join('')));
    return d;
  }

  function kv(pairs) {
    return '<table class="kv">' + pairs.filter(function (p) { return p[1] !== undefined && p[1] !== '' && p[1] !== null; }).map(function (p) { return '<tr><td>' + esc(p[0]) + '</td><td>' + p[1] + '</td></tr>'; }).join('') + '</table>';
  }
  function headersHTML(hd) {
    if (!hd) return '<p class="info">none</p>';
    return kv(Object.keys(hd).sort().map(function (k) { return [k, esc(hd[k].join(', '))]; }));
  }
  function bodyText(b) { return typeof b === 'string' ? b : b && b.b64 ? '(base64) ' + b.b64 : ''; }

  // ---- an exchange as curl and as HAR
  function shq(s) { return "'" + String(s).replace(/'/g, "'\\''") + "'"; }
  // Headers curl sets itself, from the URL and the body, or that belong
  // to one connection.
  var CURL_SKIP = {'content-length': 1, 'host': 1, 'connection': 1, 'transfer-encoding': 1, 'keep-alive': 1, 'upgrade': 1, 'proxy-connection': 1};
  function headerList(hd) {
    var out = [];
    Object.keys(hd || {}).sort().forEach(function (k) { (hd[k] || []).forEach(function (v) { out.push({name: k, value: v}); }); });
    return out;
  }
  function curlCommand(x) {
    // curl's own method is GET, or POST with a body.
    var parts = ['curl ' + (x.method !== (x.request_body ? 'POST' : 'GET') ? '-X ' + shq(x.method) + ' ' : '') + shq(x.url)];
    var compressed = false;
    headerList(x.request_headers).forEach(function (hd) {
      var k = hd.name.toLowerCase();
      if (CURL_SKIP[k]) return;
      if (k === 'accept-encoding') { compressed = true; return; }
      parts.push('-H ' + shq(hd.name + ': ' + hd.value));
    });
    if (compressed) parts.push('--compressed');
    var b = x.request_body;
    if (b && b.b64) return 'printf %s ' + shq(b.b64) + ' | base64 -d | \\\n  ' + parts.join(' \\\n  ') + ' \\\n  --data-binary @-';
    if (b) parts.push('--data-raw ' + shq(b));
    return parts.join(' \\\n  ');
  }
  // utf8Length is the length in bytes of s as UTF-8.
  function utf8Length(s) { return new TextEncoder().encode(s).length; }
  function b64Bytes(b64) { var bin = atob(b64), out = new Uint8Array(bin.length); for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i); return out; }
  function bytesB64(bytes) { var bin = ''; for (var i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000)); return btoa(bin); }
  // bodyContent is a body in HAR's terms: its text, or base64 when a
  // part is not UTF-8.
  function bodyContent(parts) {
    if (parts.every(function (p) { return typeof p === 'string'; })) { var text = parts.join(''); return {text: text, size: utf8Length(text)}; }
    var chunks = parts.map(function (p) { return typeof p === 'string' ? new TextEncoder().encode(p) : b64Bytes(p.b64); });
    var n = chunks.reduce(function (a, c) { return a + c.length; }, 0), all = new Uint8Array(n), at = 0;
    chunks.forEach(function (c) { all.set(c, at); at += c.length; });
    return {text: bytesB64(all), size: n, encoding: 'base64'};
  }
  function headerValue(hd, name) {
    for (var k in hd || {}) if (k.toLowerCase() === name) return (hd[k] || [])[0] || '';
    return '';
  }
  // harOf is exchange x of event e as a HAR 1.2 log of one entry.
  function harOf(e, x) {
    var started = D.start ? new Date(Date.parse(D.start) + (e.t || 0)) : new Date(0);
    var query = [];
    try { new URL(x.url).searchParams.forEach(function (v, k) { query.push({name: k, value: v}); }); } catch (err) { /* a URL the browser cannot parse has no query to list */ }
    var version = x.proto || 'HTTP/1.1';
    var req = {method: x.method, url: x.url, httpVersion: version, cookies: [], headers: headerList(x.request_headers), queryString: query, headersSize: -1, bodySize: 0};
    if (x.request_body) {
      var rb = bodyContent([x.request_body]);
      req.bodySize = rb.size;
      req.postData = {mimeType: headerValue(x.request_headers, 'content-type'), text: rb.text};
      if (rb.encoding) req.postData.comment = 'base64: the body is not UTF-8';
    }
    var content = bodyContent((x.chunks || []).map(function (c) { return c.data; }));
    content.mimeType = headerValue(x.response_headers, 'content-type');
    var wait = x.status ? x.ttfb_ms : x.duration_ms;
    var entry = {
      startedDateTime: started.toISOString(), time: x.duration_ms,
      request: req,
      response: {status: x.status, statusText: '', httpVersion: version, cookies: [], headers: headerList(x.response_headers), content: content, redirectURL: '', headersSize: -1, bodySize: content.size},
      cache: {},
      timings: {send: 0, wait: wait, receive: Math.max(0, x.duration_ms - wait)},
      // The chunks as they arrived: a streamed answer's pacing.
      _chunks: (x.chunks || []).map(function (c) { return {at_ms: c.at_ms, size: bodyContent([c.data]).size}; })
    };
    if (x.error) entry.comment = x.error;
    return {log: {version: '1.2', creator: {name: 'acptap', version: D.acptap || ''}, entries: [entry]}};
  }
  function copyText(text, button) {
    var done = function (ok) { button.textContent = ok ? 'copied' : 'select the command below to copy it'; };
    if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(false); });
    else done(false);
  }
  function exportHTML(i, x) {
    if (/^wss?:/i.test(x.url)) return '';
    var name = 'llm-' + (x.number || 'seq' + E[i].seq) + '.har';
    return '<div class="export"><button class="curl">copy as curl</button> <a class="har" download="' + esc(name) + '" href="data:application/json;charset=utf-8,' + esc(encodeURIComponent(JSON.stringify(harOf(E[i], x), null, 2))) + '">export HAR</a>' +
      '<details><summary>curl command (masked values as recorded)</summary><pre class="curl">' + esc(curlCommand(x)) + '</pre></details></div>';
  }

  function exchangeDetail(x) {
    var d = h('div', {class: 'exchange'});
    var body = parse(bodyText(x.request_body));
    var req = body.ok && body.v && typeof body.v === 'object' ? body.v : null;
    var s = [];
    if (x.fault) {
      s.push('<p class="fault">The replay answered this exchange\'s request with an injected fault, <b>' + esc(x.fault) + '</b> (replay --fault)' +
        (x.fault === 'malformed' ? ': the recorded answer with one event garbled.' : ', in place of the recorded answer, which was kept for the agent\'s retry.') + ' Below is the recorded exchange.</p>');
    }
    s.push(kv([['request', esc(x.method + ' ' + x.url)], ['class', esc(x.class || '')], ['format', esc(x.format || '')], ['model', esc(x.model || '')], ['stream', x.stream ? 'yes' : 'no'],
      ['status', x.incomplete ? 'in flight when the recording stopped' : esc(String(x.status))], ['TTFB', x.ttfb_ms + ' ms'], ['duration', x.duration_ms + ' ms'], ['error', esc(x.error || '')]]));
    s.push('<h3>Request</h3>');
    if (req) {
      var sys = req.system || req.instructions || req.systemInstruction;
      if (sys !== undefined) s.push('<details open><summary>system</summary><pre>' + (typeof sys === 'string' ? esc(sys) : jsonHTML(sys, null, '$', 0)) + '</pre></details>');
      var msgs = req.messages || req.input || req.contents || req.prompt;
      if (msgs !== undefined) s.push('<details open class="messages"><summary>messages (' + (Array.isArray(msgs) ? msgs.length : 1) + ')</summary><pre>' + jsonHTML(msgs, null, '$', 0) + '</pre></details>');
      var tools = req.tools;
      if (tools) {
        var names = (Array.isArray(tools) ? tools : []).map(function (t) {
          if (t.functionDeclarations) return t.functionDeclarations.map(function (f) { return f.name; }).join(', ');
          return t.name || (t.function && t.function.name) || t.type || '?';
        });
        s.push('<details><summary>tools: ' + esc(names.join(', ')) + '</summary><pre>' + jsonHTML(tools, null, '$', 0) + '</pre></details>');
      }
    }
    s.push('<details><summary>request headers (after redaction)</summary>' + headersHTML(x.request_headers) + '</details>');
    s.push('<details><summary>request body</summary><pre>' + (req ? jsonHTML(req, null, '$', 0) : esc(bodyText(x.request_body))) + '</pre></details>');
    if (x.recorded !== undefined || x.live !== undefined) {
      s.push('<details open><summary>recorded and live request, normalized</summary><table class="side"><tr><th>recorded</th><th>live</th></tr><tr><td><pre>' +
        jsonHTML(x.recorded, null, '$', 0) + '</pre></td><td><pre>' + jsonHTML(x.live, null, '$', 0) + '</pre></td></tr></table></details>');
    }
    s.push('<h3>Response</h3>');
    var m = x.message;
    if (m) {
      if (m.text) s.push('<details open class="text"><summary>text</summary><pre>' + esc(m.text) + '</pre></details>');
      if (m.reasoning) s.push('<details open><summary>reasoning</summary><pre>' + esc(m.reasoning) + '</pre></details>');
      (m.tool_calls || []).forEach(function (tc) {
        var a = parse(tc.arguments);
        s.push('<details open><summary>tool call ' + esc(tc.name) + (tc.id ? ' ' + esc(tc.id) : '') + '</summary><pre>' + (a.ok ? jsonHTML(a.v, null, '$', 0) : esc(tc.arguments)) + '</pre></details>');
      });
      var u = m.usage || {};
      s.push(kv([['stop reason', esc(m.stop_reason || '')], ['model', esc(m.model || '')], ['tokens in', String(u.input_tokens)], ['tokens out', String(u.output_tokens)], ['cached', String(u.cached_tokens)], ['reasoning tokens', String(u.reasoning_tokens)], ['total', String(u.total_tokens)], ['events', String(m.events)]]));
      (m.errors || []).forEach(function (er) { s.push('<p class="problems">stream error: ' + esc(er) + '</p>'); });
    } else if (x.chunks && x.chunks.length) {
      s.push('<pre>' + esc(x.chunks.map(function (c) { return bodyText(c.data); }).join('')) + '</pre>');
    }
    s.push('<details><summary>response headers</summary>' + headersHTML(x.response_headers) + '</details>');
    var chunks = x.chunks || [];
    var shownChunks = chunks.slice(0, 2000);
    s.push('<details class="raw"><summary>raw stream: ' + chunks.length + ' chunks</summary><table class="kv">' + shownChunks.map(function (c) {
      return '<tr><td>+' + c.at_ms + ' ms</td><td><pre>' + esc(bodyText(c.data)) + '</pre></td></tr>';
    }).join('') + '</table>' + (chunks.length > shownChunks.length ? '<p class="info">and ' + (chunks.length - shownChunks.length) + ' more</p>' : '') + '</details>');
    d.innerHTML = s.join('');
    return d;
  }

  // ---- the comparison
  function buildCompare(root) {
    var C = D.compare;
    var box = root.appendChild(h('div', {class: 'cmp', id: 'compare'}));
    var first = C.first;
    if (first) {
      var fm = box.appendChild(h('div', {class: 'firstmsg'}, '<b>first divergence:</b> ' + esc(first.message) + ' <button id="goto-first">show</button>'));
      fm.querySelector('button').onclick = scrollFirst;
    } else {
      box.appendChild(h('p', {}, 'The normalized agent streams are the same.'));
    }
    box.appendChild(h('h2', {}, 'Agent output, normalized'));
    var rowsHTML = [];
    var R = C.rows || [];
    for (var k = 0; k < R.length; k++) {
      // A long run of equal values is folded, but never the first
      // divergence's neighbourhood.
      var run = k;
      while (run < R.length && R[run].same && !isFirst(R[run])) run++;
      if (run - k > 6) {
        rowsHTML.push(cmpRow(R[k], k), cmpRow(R[k + 1], k + 1));
        rowsHTML.push('<tr class="gap" data-from="' + (k + 2) + '" data-to="' + (run - 2) + '"><td colspan="4">… ' + (run - k - 4) + ' equal values (click to show) …</td></tr>');
        rowsHTML.push(cmpRow(R[run - 2], run - 2), cmpRow(R[run - 1], run - 1));
        k = run - 1;
        continue;
      }
      rowsHTML.push(cmpRow(R[k], k));
    }
    var table = box.appendChild(h('table', {class: 'side', id: 'side'}, '<tr><th class="i">#</th><th>' + esc(C.left) + '</th><th class="i">#</th><th>' + esc(C.right) + '</th></tr>' + rowsHTML.join('')));
    table.addEventListener('click', function (ev) {
      var gap = ev.target.closest('tr.gap');
      if (!gap) return;
      var html = [];
      for (var j = +gap.dataset.from; j < +gap.dataset.to; j++) html.push(cmpRow(R[j], j));
      gap.insertAdjacentHTML('afterend', html.join(''));
      gap.remove();
    });
    if (C.requests && C.requests.length) {
      box.appendChild(h('h2', {}, 'LLM requests, normalized'));
      C.requests.forEach(function (p) {
        var marks = markSet(p.paths);
        var differs = p.paths && p.paths.length;
        var det = h('details', {class: 'request' + (differs ? ' differs' : ''), 'data-number': p.number});
        if (differs) det.open = true;
        det.innerHTML = '<summary>llm #' + p.number + ': ' + (differs ? esc(p.message || ('differs at ' + p.paths[0])) : 'the same') + '</summary>' +
          '<table class="side"><tr><th>' + esc(C.left) + '</th><th>' + esc(C.right) + '</th></tr><tr><td class="v"><pre>' + jsonHTML(p.left, marks, '$', 0) + '</pre></td><td class="v"><pre>' + jsonHTML(p.right, marks, '$', 0) + '</pre></td></tr></table>';
        box.appendChild(det);
      });
    }
    var done = false;
    onShow.compare = function () { if (!done) { done = true; scrollFirst(); } };
  }
  function isFirst(row) { var f = D.compare.first; return !!f && ((f.a >= 0 && row.a === f.a) || (f.b >= 0 && row.b === f.b)); }
  function cmpRow(row, k) {
    var C = D.compare, f = C.first, first = isFirst(row);
    // Only the members that differ are marked: the rest of a changed
    // value reads as the same.
    var marks = markSet((row.paths || []).concat(first ? [f.path] : []));
    var cls = row.same ? 'eq' : row.a >= 0 && row.b >= 0 ? 'changed' : row.a >= 0 ? 'left' : 'right';
    var cell = function (list, i) { return i >= 0 ? '<td class="i">' + i + '</td><td class="v"><pre>' + jsonHTML(list[i], marks, '$', 0) + '</pre></td>' : '<td class="i"></td><td class="v"></td>'; };
    return '<tr class="' + cls + (first ? ' first' : '') + '"' + (first ? ' id="first-divergence"' : '') + ' data-k="' + k + '">' + cell(C.want, row.a) + cell(C.got, row.b) + '</tr>';
  }
  function scrollFirst() {
    var f = document.getElementById('first-divergence');
    if (f) f.scrollIntoView({block: 'center'});
  }

  var redrawWaterfall = function () {};

  // ---- the waterfall: every exchange and turn on one time axis
  // end is when event e ended: an exchange's response's end, a line's
  // arrival.
  function endOf(e) { return e.t + (e.exchange ? e.exchange.duration_ms || 0 : 0); }
  // turnSpan is when turn k (from 0) began and ended: its prompt, and its
  // answer, or its last event when it was never answered.
  function turnSpan(k) {
    var turn = TURNS[k], from = E[turn.prompt].t, to = turn.answer >= 0 ? E[turn.answer].t : from;
    for (var i = turn.prompt; i < E.length && (turn.answer < 0 || i <= turn.answer); i++) if (E[i].turn === k + 1) to = Math.max(to, endOf(E[i]));
    return [from, to];
  }
  // niceStep is the axis's step for a range of ms: 1, 2 or 5 times a
  // power of ten, about eight to a range.
  function niceStep(ms) {
    var raw = ms / 8, p = Math.pow(10, Math.floor(Math.log10(raw || 1))), n = raw / p;
    return (n < 1.5 ? 1 : n < 3.5 ? 2 : n < 7.5 ? 5 : 10) * p;
  }
  function fmtDur(ms) { return ms < 1000 ? Math.round(ms) + ' ms' : (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s'; }

  function buildWaterfall(root) {
    var bar = root.appendChild(h('div', {class: 'toolbar'}));
    var zoom = h('select', {id: 'wf-zoom'}, '<option value="-1">the whole session</option>' + TURNS.map(function (t, k) {
      return '<option value="' + k + '">turn ' + (k + 1) + ': ' + esc((t.text || '').slice(0, 60)) + '</option>';
    }).join(''));
    bar.appendChild(h('label', {}, 'zoom to ')).appendChild(zoom);
    bar.appendChild(h('span', {class: 'wf-legend'}, '<i class="wf-ttfb"></i> waiting for the first byte (TTFB) <i class="wf-stream"></i> receiving the response <i class="wf-tick lane-editor"></i> editor → agent frame <i class="wf-tick lane-agent"></i> agent → editor frame'));
    var box = root.appendChild(h('div', {class: 'wf', id: 'waterfall'}));
    zoom.onchange = function () { draw(+zoom.value); };
    box.addEventListener('click', function (ev) {
      var t = ev.target.closest('[data-turn]');
      if (t) { zoom.value = t.dataset.turn; draw(+t.dataset.turn); return; }
      var x = ev.target.closest('[data-i]');
      if (x) { show('timeline'); jump(+x.dataset.i); }
    });
    var drawn = false;
    onShow.waterfall = function () { if (!drawn) { drawn = true; draw(-1); } };
    // A live page's new events: drawn again at the same zoom, a new
    // turn added to the menu.
    redrawWaterfall = function () {
      for (var k = zoom.options.length - 1; k < TURNS.length; k++) zoom.appendChild(h('option', {value: String(k)}, 'turn ' + (k + 1) + ': ' + esc((TURNS[k].text || '').slice(0, 60))));
      if (drawn) draw(+zoom.value);
    };

    // draw lays the waterfall out for turn k (from 0), or the whole
    // session for -1.
    function draw(k) {
      var from = 0, to = 0;
      E.forEach(function (e) { to = Math.max(to, endOf(e)); });
      if (k >= 0) { var span = turnSpan(k); from = span[0]; to = span[1]; }
      var pad = (to - from) * 0.01 || 1;
      from = Math.max(0, from - pad); to += pad;
      var pos = function (t) { return Math.min(100, Math.max(0, (t - from) / (to - from) * 100)); };
      var inRange = function (a, b) { return b >= from && a <= to; };
      var out = [];
      var step = niceStep(to - from), marks = '';
      for (var m = Math.ceil(from / step) * step; m <= to; m += step) marks += '<span class="wf-mark" style="left:' + pos(m).toFixed(3) + '%">' + esc(fmtT(m)) + '</span>';
      out.push('<div class="wf-row wf-axis"><div class="wf-label">' + esc(fmtDur(to - from)) + ' shown</div><div class="wf-track">' + marks + '</div></div>');
      var turns = '';
      TURNS.forEach(function (t, n) {
        var sp = turnSpan(n);
        if (!inRange(sp[0], sp[1])) return;
        var l = pos(sp[0]), w = Math.max(pos(sp[1]) - l, 0.2);
        turns += '<span class="wf-turn' + (t.answer < 0 || /^error/.test(t.stop || '') ? ' err' : '') + '" data-turn="' + n + '" style="left:' + l.toFixed(3) + '%;width:' + w.toFixed(3) + '%" title="' +
          esc('turn ' + (n + 1) + ': ' + (t.text || '') + ' (' + fmtDur(sp[1] - sp[0]) + ', ' + (t.answer < 0 ? 'never answered' : t.stop || 'answered') + ')') + '">T' + (n + 1) + '</span>';
      });
      out.push('<div class="wf-row"><div class="wf-label">turns (click to zoom)</div><div class="wf-track">' + turns + '</div></div>');
      // The frames of each lane as ticks, one per tenth of a percent.
      LANES.filter(function (l) { return l !== 'llm'; }).forEach(function (l) {
        var seen = {}, ticks = '';
        E.forEach(function (e, i) {
          if (e.lane !== l || e.exchange || e.t < from || e.t > to) return;
          var p = pos(e.t), key = Math.round(p * 10);
          if (seen[key]) return;
          seen[key] = true;
          ticks += '<i class="wf-tick lane-' + l + (e.err ? ' err' : '') + '" style="left:' + p.toFixed(3) + '%" data-i="' + i + '" title="' + esc(evLabel(i)) + '"></i>';
        });
        if (ticks) out.push('<div class="wf-row"><div class="wf-label">' + esc(laneLabel(l)) + ' frames</div><div class="wf-track">' + ticks + '</div></div>');
      });
      E.forEach(function (e, i) {
        var x = e.exchange;
        if (!x || !inRange(e.t, endOf(e))) return;
        var l = pos(e.t), wait = x.status ? x.ttfb_ms : x.duration_ms;
        var w1 = pos(e.t + wait) - l, w2 = pos(endOf(e)) - pos(e.t + wait);
        var label = title(e) + ' ' + (e.summary || '');
        out.push('<div class="wf-row wf-x-row"><div class="wf-label" data-i="' + i + '" title="' + esc(label) + '">' + esc(label) + '</div><div class="wf-track">' +
          '<span class="wf-x' + (e.err ? ' err' : '') + (x.incomplete ? ' incomplete' : '') + '" data-i="' + i + '" style="left:' + l.toFixed(3) + '%;width:' + Math.max(w1 + w2, 0.15).toFixed(3) + '%" title="' +
          esc(title(e) + ': TTFB ' + fmtDur(x.ttfb_ms) + ', ' + fmtDur(x.duration_ms) + ' in all' + (x.status ? '' : ', no response')) + '">' +
          // The two parts share the bar as the waiting and the receiving
          // share the exchange's time.
          '<i class="wf-ttfb" style="width:' + (w1 + w2 > 0 ? w1 / (w1 + w2) * 100 : 100).toFixed(3) + '%"></i><i class="wf-stream" style="width:' + (w1 + w2 > 0 ? w2 / (w1 + w2) * 100 : 0).toFixed(3) + '%"></i></span>' +
          '<span class="wf-dur" style="left:' + (l + w1 + w2).toFixed(3) + '%">' + esc(fmtDur(x.duration_ms)) + '</span></div></div>');
      });
      box.innerHTML = out.join('');
      box.dataset.from = from;
      box.dataset.to = to;
    }
  }

  // ---- assemble
  if (D.kind !== 'diff') buildTimeline(tab('timeline', D.kind === 'replay' ? 'Replay run' : 'Timeline'));
  if (D.timed) buildWaterfall(tab('waterfall', 'Waterfall'));
  if (D.compare) buildCompare(tab('compare', D.kind === 'diff' ? 'Comparison' : 'Recorded vs replayed'));
  show(D.compare && (D.status === 'FAIL' || D.status === 'DIFFERENT' || D.kind === 'diff') ? 'compare' : 'timeline');
  if (shown === 'timeline') render();
  // #seq-N opens the page at row N, selected: a link to one row.
  function openHash() {
    var m = /^#seq-(\d+)$/.exec(location.hash);
    if (!m || !views.timeline) return;
    for (var i = 0; i < E.length; i++) {
      if (E[i].seq === +m[1]) {
        if (shown !== 'timeline') show('timeline');
        if (state.sel !== i) jump(i);
        return;
      }
    }
  }
  openHash();
  window.addEventListener('hashchange', openHash);

  // ---- a live page (acptap show --html --follow): the page asks its
  // server for the recording's page again whenever it grows, and shows
  // it without a reload, where the user is.
  function setData(nd) {
    var old = E, selSeq = state.sel >= 0 ? old[state.sel].seq : null, selJSON = state.sel >= 0 ? JSON.stringify(old[state.sel]) : '';
    // The view stays where it is: on the row at its top, or at the end
    // when it was there (a growing recording's tail, followed).
    var atEnd = list.scrollTop + list.clientHeight >= list.scrollHeight - H;
    var top = rows[Math.floor(list.scrollTop / H)], topSeq = top ? old[top.i].seq : null, off = list.scrollTop % H;
    var openSeqs = Object.keys(state.open).filter(function (g) { return state.open[g]; }).map(function (g) { return old[G[g].events[0]].seq; });
    D = nd; E = D.events || []; G = D.groups || []; T = D.tools || []; TURNS = D.turns || [];
    indexSeqs();
    hay = null;
    state.open = {};
    openSeqs.forEach(function (sq) { var i = bySeq[sq]; if (i !== undefined && E[i].group) state.open[E[i].group - 1] = true; });
    renderHeader();
    if (mcpLane()) laneBox('mcp');
    colsEl.innerHTML = colsHTML();
    fillKinds();
    fillSessions();
    state.sel = selSeq !== null && bySeq[selSeq] !== undefined ? bySeq[selSeq] : -1;
    state.rel = state.sel >= 0 ? related(state.sel) : {};
    refilter();
    if (atEnd) list.scrollTop = list.scrollHeight;
    else if (topSeq !== null && bySeq[topSeq] !== undefined) {
      for (var r = 0; r < rows.length; r++) if (rows[r].i === bySeq[topSeq]) { list.scrollTop = r * H + off; break; }
    }
    render();
    // The detail is drawn again only when its event changed: what the
    // user opened in it stays open.
    if (state.sel >= 0 && JSON.stringify(E[state.sel]) !== selJSON) {
      var scroll = detail.scrollTop;
      detail.innerHTML = '';
      detail.appendChild(state.selGroup ? groupDetail(G[E[state.sel].group - 1]) : eventDetail(state.sel));
      detail.scrollTop = scroll;
    }
    redrawWaterfall();
  }
  function liveStatus(text) { liveNote = text; renderHeader(); }
  function poll() {
    fetch(D.live.url + '?after=' + D.live.version, {cache: 'no-store'}).then(function (r) {
      if (r.status === 204) return null;
      if (!r.ok) throw new Error('HTTP ' + r.status);
      return r.json();
    }).then(function (nd) {
      if (nd) setData(nd);
      if (D.live.done) liveStatus('The recording ended: this page shows all of it.');
      else { liveStatus('Live: the page grows with the recording.'); poll(); }
    }).catch(function () {
      liveStatus('acptap stopped serving this page: it shows the recording as of the last update.');
    });
  }
  if (D.live) {
    liveNote = D.live.done ? 'The recording ended: this page shows all of it.' : 'Live: the page grows with the recording.';
    renderHeader();
    if (!D.live.done) poll();
  }
  window.acptapReadyMs = performance.now();
  document.body.setAttribute('data-ready', '1');
})();
