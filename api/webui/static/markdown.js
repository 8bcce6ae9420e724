// A small Markdown renderer for model output: headings, paragraphs, bold,
// italic, strikethrough, inline code, fenced code blocks, lists, quotes,
// tables, rules and links. It builds DOM nodes and puts text in them only
// as text nodes, so HTML in model output is shown, never parsed; links keep
// only absolute http, https and mailto addresses.
(function () {
  'use strict';

  // maxDepth bounds nesting (quotes in lists in quotes, emphasis in
  // emphasis), so that hostile text cannot exhaust the stack.
  const maxDepth = 16;

  const fenceRe = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)/;
  const headingRe = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$/;
  const hrRe = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const quoteRe = /^ {0,3}> ?(.*)$/;
  const listRe = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
  const tableSepRe = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
  const escapable = '\\`*_{}[]()#+-.!~|<>"\'';

  function el(tag, cls) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    return e;
  }

  // safeHref is the address a link may have: an absolute http, https or
  // mailto URL, else '' (javascript:, data:, relative paths, nonsense).
  function safeHref(raw) {
    let u;
    try {
      u = new URL(raw.trim());
    } catch (e) {
      return '';
    }
    return u.protocol === 'http:' || u.protocol === 'https:' || u.protocol === 'mailto:' ? u.href : '';
  }

  // render returns a DocumentFragment of text's Markdown.
  function render(text) {
    const frag = document.createDocumentFragment();
    const lines = String(text).replace(/\r\n?/g, '\n').split('\n')
      .map(l => l.replace(/^\t+/, t => '    '.repeat(t.length)));
    blocks(lines, frag, 0);
    return frag;
  }

  function startsBlock(lines, i) {
    const l = lines[i];
    return fenceRe.test(l) || headingRe.test(l) || hrRe.test(l) || quoteRe.test(l) || listRe.test(l) ||
      (i + 1 < lines.length && l.includes('|') && tableSepRe.test(lines[i + 1]));
  }

  function blocks(lines, parent, depth) {
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (!line.trim()) {
        i++;
        continue;
      }
      if (depth >= maxDepth) {
        const p = el('p', 'plain');
        p.textContent = lines.slice(i).join('\n');
        parent.append(p);
        return;
      }
      let m;
      if ((m = fenceRe.exec(line))) {
        i = fence(lines, i, m, parent);
      } else if ((m = headingRe.exec(line))) {
        const h = el('h' + m[1].length);
        inline((m[2] || '').replace(/[ \t]+#+$/, ''), h, depth);
        parent.append(h);
        i++;
      } else if (hrRe.test(line)) {
        parent.append(el('hr'));
        i++;
      } else if (quoteRe.test(line)) {
        const q = el('blockquote');
        const inner = [];
        while (i < lines.length && (m = quoteRe.exec(lines[i]))) {
          inner.push(m[1]);
          i++;
        }
        blocks(inner, q, depth + 1);
        parent.append(q);
      } else if (listRe.test(line)) {
        i = list(lines, i, parent, depth);
      } else if (i + 1 < lines.length && line.includes('|') && tableSepRe.test(lines[i + 1])) {
        i = table(lines, i, parent, depth);
      } else {
        i = paragraph(lines, i, parent, depth);
      }
    }
  }

  // paragraph keeps the model's line breaks: chat output means them.
  function paragraph(lines, i, parent, depth) {
    const p = el('p');
    let first = true;
    do {
      if (!first) p.append(el('br'));
      inline(lines[i].trim(), p, depth);
      first = false;
      i++;
    } while (i < lines.length && lines[i].trim() && !startsBlock(lines, i));
    parent.append(p);
    return i;
  }

  // fence is a code block; one not closed yet (a reply still streaming)
  // runs to the end.
  function fence(lines, i, m, parent) {
    const marker = m[1];
    const close = new RegExp('^ {0,3}' + (marker[0] === '`' ? '`' : '~') + '{' + marker.length + ',}\\s*$');
    const body = [];
    for (i++; i < lines.length && !close.test(lines[i]); i++) body.push(lines[i]);
    const pre = el('pre');
    const code = el('code');
    const lang = m[2].replace(/[^\w+#.-]/g, '');
    if (lang) {
      code.className = 'language-' + lang;
      pre.dataset.lang = lang;
    }
    code.textContent = body.join('\n');
    pre.append(code);
    parent.append(pre);
    return i + 1;
  }

  function indentOf(line) {
    return line.length - line.trimStart().length;
  }

  function list(lines, i, parent, depth) {
    const first = listRe.exec(lines[i]);
    const indent = first[1].length;
    const ordered = /\d/.test(first[2]);
    const kind = ordered ? first[2].slice(-1) : first[2];
    const sameList = m => m && m[1].length === indent && (ordered ? /\d/.test(m[2]) && m[2].slice(-1) === kind : m[2] === kind);
    const l = el(ordered ? 'ol' : 'ul');
    if (ordered) {
      const n = parseInt(first[2], 10);
      if (n !== 1) l.start = n;
    }
    const items = [];
    let item = null;
    while (i < lines.length) {
      const line = lines[i];
      const m = listRe.exec(line);
      if (sameList(m)) {
        item = { lines: [m[3] || ''], indent: m[1].length + m[2].length + 1 };
        items.push(item);
        i++;
        continue;
      }
      if (!line.trim()) {
        // A blank line goes on with the list only when an item or an
        // indented line follows it.
        let j = i + 1;
        while (j < lines.length && !lines[j].trim()) j++;
        if (j < lines.length && (sameList(listRe.exec(lines[j])) || indentOf(lines[j]) > indent)) {
          for (; i < j; i++) item.lines.push('');
          continue;
        }
        break;
      }
      const ind = indentOf(line);
      if (ind > indent) {
        item.lines.push(line.slice(Math.min(ind, item.indent)));
      } else if (!startsBlock(lines, i) && item.lines[item.lines.length - 1].trim()) {
        item.lines.push(line); // a lazy continuation of the item's text
      } else {
        break;
      }
      i++;
    }
    for (const it of items) {
      const li = el('li');
      blocks(it.lines, li, depth + 1);
      if (!it.lines.includes('')) {
        // A tight item: its text is not a paragraph of its own.
        for (const c of Array.from(li.children)) {
          if (c.tagName === 'P') c.replaceWith(...c.childNodes);
        }
      }
      l.append(li);
    }
    parent.append(l);
    return i;
  }

  // cells splits a table row on the pipes that are not escaped.
  function cells(line) {
    let s = line.trim();
    if (s.startsWith('|')) s = s.slice(1);
    if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
    const out = [];
    let cur = '';
    for (let k = 0; k < s.length; k++) {
      if (s[k] === '\\' && s[k + 1] === '|') {
        cur += '\\|';
        k++;
      } else if (s[k] === '|') {
        out.push(cur.trim());
        cur = '';
      } else {
        cur += s[k];
      }
    }
    out.push(cur.trim());
    return out;
  }

  function table(lines, i, parent, depth) {
    const head = cells(lines[i]);
    const aligns = cells(lines[i + 1]).map(c =>
      c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : '');
    const t = el('table');
    const row = (texts, tag) => {
      const tr = el('tr');
      head.forEach((_, k) => {
        const c = el(tag, aligns[k] ? 'align-' + aligns[k] : '');
        inline(texts[k] || '', c, depth);
        tr.append(c);
      });
      return tr;
    };
    const thead = el('thead');
    thead.append(row(head, 'th'));
    const tbody = el('tbody');
    for (i += 2; i < lines.length && lines[i].trim() && lines[i].includes('|'); i++) tbody.append(row(cells(lines[i]), 'td'));
    t.append(thead, tbody);
    parent.append(t);
    return i;
  }

  // runAt is the length of the run of c at s[i].
  function runAt(s, i, c) {
    let n = 0;
    while (s[i + n] === c) n++;
    return n;
  }

  // A memo remembers, for one string, the searches that found nothing
  // from some position on, so that text with many unmatched backticks,
  // asterisks or brackets renders in linear time, not quadratic: a reply is
  // rendered again for every piece that streams in.
  function newMemo() {
    return { code: new Map(), emphasis: new Map() };
  }

  // codeEnd is where the code span opening at s[i] ends (past its closing
  // backticks), or -1 when it is not closed.
  function codeEnd(s, i, memo) {
    const n = runAt(s, i, '`');
    if (i >= (memo.code.get(n) ?? Infinity)) return -1;
    for (let j = i + n; j < s.length;) {
      if (s[j] !== '`') {
        j++;
        continue;
      }
      const m = runAt(s, j, '`');
      if (m === n) return j + m;
      j += m;
    }
    memo.code.set(n, i);
    return -1;
  }

  // emphasis finds the span that the delimiter run at s[i] opens: *em*,
  // **strong**, ***both***, _em_, __strong__, ~~struck~~. It returns
  // {tag, body, end} or null.
  function emphasis(s, i, c, memo) {
    const n = runAt(s, i, c);
    if (c === '~' && n !== 2) return null;
    const after = s[i + n];
    if (after === undefined || /\s/.test(after)) return null;
    if (c === '_' && i > 0 && /[\p{L}\p{N}]/u.test(s[i - 1])) return null; // snake_case
    const size = n >= 2 ? 2 : 1;
    // Whether a run closes does not depend on the opener: a search that
    // found no closer from here on fails for every later opener too.
    const key = c + size;
    if (i >= (memo.emphasis.get(key) ?? Infinity)) return null;
    for (let j = i + n; j < s.length;) {
      const ch = s[j];
      if (ch === '\\') {
        j += 2;
        continue;
      }
      if (ch === '`') {
        const e = codeEnd(s, j, memo);
        j = e < 0 ? j + runAt(s, j, '`') : e;
        continue;
      }
      if (ch !== c) {
        j++;
        continue;
      }
      const m = runAt(s, j, c);
      const end = j + m;
      const closes = !/\s/.test(s[j - 1]) && (m === size || m >= 3) &&
        !(c === '_' && end < s.length && /[\p{L}\p{N}]/u.test(s[end]));
      if (closes && j - i > size) {
        const tag = c === '~' ? 'del' : size === 2 ? 'strong' : 'em';
        return { tag, body: s.slice(i + size, end - size), end };
      }
      j = end;
    }
    memo.emphasis.set(key, i);
    return null;
  }

  // maxLinkText and maxURL bound a link's text and address, and so the
  // search for their ends.
  const maxLinkText = 1000;
  const maxURL = 4096;

  // link parses [text](url "title") at s[i] === '['; it returns {text,
  // url, end} or null.
  function link(s, i, memo) {
    let depth = 0;
    let close = -1;
    for (let j = i, stop = Math.min(s.length, i + maxLinkText); j < stop && close < 0; j++) {
      const ch = s[j];
      if (ch === '\\') {
        j++;
      } else if (ch === '`') {
        const e = codeEnd(s, j, memo);
        j = e > 0 ? e - 1 : j + runAt(s, j, '`') - 1;
      } else if (ch === '[') {
        depth++;
      } else if (ch === ']' && --depth === 0) {
        close = j;
      }
    }
    if (close < 0 || s[close + 1] !== '(') return null;
    const text = s.slice(i + 1, close);
    let k = close + 2;
    while (s[k] === ' ') k++;
    let url;
    if (s[k] === '<') {
      const e = s.indexOf('>', k);
      if (e < 0 || e - k > maxURL) return null;
      url = s.slice(k + 1, e);
      k = e + 1;
    } else {
      let parens = 0;
      const start = k;
      for (const stop = Math.min(s.length, k + maxURL); k < stop && !/\s/.test(s[k]); k++) {
        if (s[k] === '(') parens++;
        else if (s[k] === ')' && parens-- === 0) break;
      }
      url = s.slice(start, k);
    }
    while (s[k] === ' ') k++;
    if (s[k] === '"' || s[k] === "'") {
      const e = s.indexOf(s[k], k + 1);
      if (e < 0 || e - k > maxLinkText) return null;
      k = e + 1;
      while (s[k] === ' ') k++;
    }
    if (s[k] !== ')') return null;
    return { text, url, end: k + 1 };
  }

  // appendLink adds a link, or only its text when its address is not safe.
  // An image becomes a link to it: model output loads nothing by itself.
  function appendLink(parent, r, depth, image) {
    const href = safeHref(r.url);
    if (!href) {
      inline(r.text, parent, depth + 1);
      return;
    }
    const a = el('a');
    a.href = href;
    a.target = '_blank';
    a.rel = 'noopener noreferrer nofollow';
    if (image) {
      a.textContent = r.text || href;
      a.title = 'image: ' + href;
    } else {
      inline(r.text, a, depth + 1, true);
    }
    parent.append(a);
  }

  // inline renders s's spans into parent; inLink leaves out links inside
  // links.
  function inline(s, parent, depth, inLink) {
    const memo = newMemo();
    let buf = '';
    const flush = () => {
      if (buf) parent.append(document.createTextNode(buf));
      buf = '';
    };
    let i = 0;
    while (i < s.length) {
      const c = s[i];
      if (c === '\\' && i + 1 < s.length && escapable.includes(s[i + 1])) {
        buf += s[i + 1];
        i += 2;
        continue;
      }
      if (c === '`') {
        const n = runAt(s, i, '`');
        const end = codeEnd(s, i, memo);
        if (end < 0) {
          buf += s.slice(i, i + n);
          i += n;
          continue;
        }
        let body = s.slice(i + n, end - n);
        if (body.length > 2 && body[0] === ' ' && body[body.length - 1] === ' ' && body.trim()) body = body.slice(1, -1);
        flush();
        const code = el('code');
        code.textContent = body;
        parent.append(code);
        i = end;
        continue;
      }
      if (c === '*' || c === '_' || c === '~') {
        const r = depth < maxDepth ? emphasis(s, i, c, memo) : null;
        if (r) {
          flush();
          const e = el(r.tag);
          inline(r.body, e, depth + 1, inLink);
          parent.append(e);
          i = r.end;
        } else {
          const n = runAt(s, i, c);
          buf += s.slice(i, i + n);
          i += n;
        }
        continue;
      }
      if (!inLink && depth < maxDepth && (c === '[' || c === '!' && s[i + 1] === '[')) {
        const image = c === '!';
        const r = link(s, image ? i + 1 : i, memo);
        if (r) {
          flush();
          appendLink(parent, r, depth, image);
          i = r.end;
          continue;
        }
      }
      if (!inLink && c === 'h' && /^https?:\/\/\S/.test(s.slice(i, i + 9)) && (i === 0 || !/[\w/:.@-]/.test(s[i - 1]))) {
        let j = i;
        while (j < s.length && !/[\s<>"'`]/.test(s[j])) j++;
        let url = s.slice(i, j).replace(/[.,;:!?*_~]+$/, '');
        const open = (url.match(/\(/g) || []).length;
        while (url.endsWith(')') && (url.match(/\)/g) || []).length > open) url = url.slice(0, -1);
        const href = safeHref(url);
        if (href) {
          flush();
          const a = el('a');
          a.href = href;
          a.target = '_blank';
          a.rel = 'noopener noreferrer nofollow';
          a.textContent = url;
          parent.append(a);
          i += url.length;
          continue;
        }
      }
      buf += c;
      i++;
    }
    flush();
  }

  window.ruvllm = Object.assign(window.ruvllm || {}, { markdown: { render, safeHref } });
})();
