// A tiny Markdown renderer for model answers, built for safety: it makes DOM
// nodes with createElement and text nodes only (no innerHTML, no raw HTML
// passes through), and links keep only http(s) and mailto URLs.
//
// Blocks: paragraphs, fenced code (```lang), headings (#…######), bullet
// and numbered lists (one level), block quotes. Inline: `code`, **bold**,
// *italic* / _italic_, [text](url), bare line breaks inside a paragraph.
// Anything else is shown as the text it is.

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

function el(tag, cls) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  return e;
}

// inline appends the inline content of text to parent.
export function inline(parent, text) {
  let i = 0;
  let buf = '';
  const flush = () => {
    if (buf) parent.append(document.createTextNode(buf));
    buf = '';
  };
  while (i < text.length) {
    const c = text[i];
    if (c === '\\' && i + 1 < text.length && /[\\`*_[\]()#>-]/.test(text[i + 1])) {
      buf += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '`') {
      const end = text.indexOf('`', i + 1);
      if (end > i + 1) {
        flush();
        const code = el('code');
        code.textContent = text.slice(i + 1, end);
        parent.append(code);
        i = end + 1;
        continue;
      }
    }
    if ((c === '*' || c === '_') && text[i + 1] === c) {
      const end = text.indexOf(c + c, i + 2);
      if (end > i + 2) {
        flush();
        const b = el('strong');
        inline(b, text.slice(i + 2, end));
        parent.append(b);
        i = end + 2;
        continue;
      }
    }
    if ((c === '*' || c === '_') && text[i + 1] && text[i + 1] !== ' ' && (c === '*' || i === 0 || /\W/.test(text[i - 1]))) {
      const end = text.indexOf(c, i + 1);
      if (end > i + 1 && text[end - 1] !== ' ') {
        flush();
        const em = el('em');
        inline(em, text.slice(i + 1, end));
        parent.append(em);
        i = end + 1;
        continue;
      }
    }
    if (c === '[') {
      const close = text.indexOf('](', i + 1);
      const end = close > 0 ? text.indexOf(')', close + 2) : -1;
      if (close > i && end > close) {
        const label = text.slice(i + 1, close);
        const url = text.slice(close + 2, end).trim();
        flush();
        if (SAFE_URL.test(url)) {
          const a = el('a');
          a.href = url;
          a.rel = 'noopener noreferrer nofollow';
          a.target = '_blank';
          inline(a, label);
          parent.append(a);
        } else {
          inline(parent, label);
        }
        i = end + 1;
        continue;
      }
    }
    if (c === '\n') {
      flush();
      parent.append(el('br'));
      i++;
      continue;
    }
    buf += c;
    i++;
  }
  flush();
}

const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const NUMBER = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const FENCE = /^\s{0,3}(```|~~~)\s*([\w+-]*)\s*$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;

// render turns Markdown text into a DocumentFragment.
export function render(text) {
  const out = document.createDocumentFragment();
  const lines = String(text ?? '').replace(/\r\n?/g, '\n').split('\n');
  let para = [];
  const endPara = () => {
    if (!para.length) return;
    const p = el('p');
    inline(p, para.join('\n'));
    out.append(p);
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    let m;
    if ((m = FENCE.exec(line))) {
      endPara();
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
      const pre = el('pre', 'code-block');
      const code = el('code');
      if (m[2]) code.dataset.lang = m[2];
      code.textContent = body.join('\n');
      pre.append(code);
      out.append(pre);
      continue;
    }
    if (!line.trim()) {
      endPara();
      continue;
    }
    if ((m = HEADING.exec(line))) {
      endPara();
      // Headings inside an answer sit under the page's own: h4 and below.
      const hd = el(`h${Math.min(6, m[1].length + 3)}`, 'md-h');
      inline(hd, m[2]);
      out.append(hd);
      continue;
    }
    if (BULLET.test(line) || NUMBER.test(line)) {
      endPara();
      const ordered = !BULLET.test(line);
      const list = el(ordered ? 'ol' : 'ul');
      const first = NUMBER.exec(line);
      if (ordered && first && first[1] !== '1') list.start = Number(first[1]);
      while (i < lines.length) {
        const item = ordered ? NUMBER.exec(lines[i]) : BULLET.exec(lines[i]);
        if (!item) {
          // A continuation line (indented) belongs to the item above.
          if (lines[i].trim() && /^\s{2,}/.test(lines[i]) && list.lastElementChild) {
            inline(list.lastElementChild, '\n' + lines[i].trim());
            i++;
            continue;
          }
          break;
        }
        const li = el('li');
        inline(li, ordered ? item[2] : item[1]);
        list.append(li);
        i++;
      }
      i--;
      out.append(list);
      continue;
    }
    if ((m = QUOTE.exec(line))) {
      endPara();
      const q = el('blockquote');
      const body = [m[1]];
      while (i + 1 < lines.length && (m = QUOTE.exec(lines[i + 1]))) {
        body.push(m[1]);
        i++;
      }
      q.append(render(body.join('\n')));
      out.append(q);
      continue;
    }
    para.push(line);
  }
  endPara();
  return out;
}
