// opledger console: live updates, nothing else. Every page works without
// this script; with it, an open page asks the server every few seconds
// whether its main content changed (an ETag round trip, 304 when not) and
// swaps it in, unless the person is working in it: focus inside it, a
// field edited, or the tab hidden. A button pauses and resumes.
(function () {
  'use strict';
  var main = document.getElementById('main');
  var live = document.getElementById('live');
  if (!main || !main.dataset.refresh || !live || !window.fetch) { return; }
  var every = Math.max(1, parseInt(main.dataset.refresh, 10) || 5) * 1000;
  var etag = null, paused = false, busy = false, failures = 0;
  var status = document.createElement('span');
  var toggle = document.createElement('button');
  toggle.type = 'button';
  toggle.className = 'quiet';
  toggle.id = 'live-toggle';
  live.appendChild(status);
  live.appendChild(document.createTextNode(' '));
  live.appendChild(toggle);
  function show(text) {
    status.textContent = text;
    toggle.textContent = paused ? 'Resume live updates' : 'Pause live updates';
    toggle.setAttribute('aria-pressed', paused ? 'true' : 'false');
  }
  toggle.addEventListener('click', function () {
    paused = !paused;
    show(paused ? 'Live updates paused.' : 'Live updates on.');
    if (!paused) { schedule(0); }
  });
  function edited() {
    var active = document.activeElement;
    if (active && active !== main && main.contains(active)) { return true; }
    var fields = main.querySelectorAll('input, textarea, select');
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === 'hidden') { continue; }
      if (f.type === 'checkbox' || f.type === 'radio') {
        if (f.checked !== f.defaultChecked) { return true; }
      } else if (f.tagName === 'SELECT') {
        for (var j = 0; j < f.options.length; j++) {
          if (f.options[j].selected !== f.options[j].defaultSelected) { return true; }
        }
      } else if (f.value !== f.defaultValue) {
        return true;
      }
    }
    return false;
  }
  function swap(html) {
    var open = [];
    main.querySelectorAll('details[open]').forEach(function (d) { if (d.id) { open.push(d.id); } });
    var scroll = [];
    main.querySelectorAll('.scroll').forEach(function (s) { scroll.push(s.scrollLeft); });
    main.innerHTML = html;
    open.forEach(function (id) { var d = document.getElementById(id); if (d) { d.open = true; } });
    main.querySelectorAll('.scroll').forEach(function (s, i) { if (i < scroll.length) { s.scrollLeft = scroll[i]; } });
  }
  var timer = null;
  function schedule(delay) {
    if (timer) { clearTimeout(timer); }
    timer = setTimeout(tick, delay === undefined ? every : delay);
  }
  function now() { return new Date().toISOString().substring(11, 19); }
  function tick() {
    timer = null;
    if (paused) { return; }
    if (document.hidden || busy || edited()) { schedule(); return; }
    busy = true;
    var headers = { 'X-Console-Fragment': 'main' };
    if (etag) { headers['If-None-Match'] = etag; }
    fetch(location.href, { headers: headers, credentials: 'same-origin', cache: 'no-store', redirect: 'manual' })
      .then(function (res) {
        if (res.status === 304) { failures = 0; show('Up to date at ' + now() + ' UTC.'); return; }
        if (res.status !== 200) {
          paused = true;
          show('Live updates stopped (HTTP ' + res.status + '): reload the page.');
          return;
        }
        etag = res.headers.get('ETag');
        return res.text().then(function (html) {
          if (!edited()) { swap(html); }
          failures = 0;
          show('Updated at ' + now() + ' UTC.');
        });
      })
      .catch(function () { failures++; show('Cannot reach the server; retrying.'); })
      .finally(function () { busy = false; schedule(failures ? Math.min(every * (failures + 1), 60000) : every); });
  }
  document.addEventListener('visibilitychange', function () { if (!document.hidden && !paused) { schedule(0); } });
  show('Live updates on.');
  schedule();
}());
