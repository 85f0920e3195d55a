# md2man.awk -- turn a document of docs/ written in Markdown into a man
# page, so that a reference kept in Markdown (docs/FORMAT.md) is also
# installed as one (logengine-format(5)) and the two cannot differ.
#
#   awk -v name=logengine-format -v section=5 -v version=0.1.0 \
#       -v source=FILE.md -f scripts/md2man.awk FILE.md
#
# The Markdown it knows is what docs/ uses: a "# " title (the NAME line),
# "## " sections, paragraphs, "* " bullets (continued by indented lines),
# ``` code blocks, tables (| a | b | with a |---:| alignment row), and
# `code`, **bold**, *italic* inside text.  Anything else passes as text.
# Tables need tbl: the page starts with the '\" t line man(1) reads.

function esc(s) {
	gsub(/\\/, "\\e", s)
	return s
}

# The text between `...` in bold, **...** bold, *...* italic.
function inline(s,    out, n, i, parts, t) {
	n = split(s, parts, "`")
	out = ""
	for (i = 1; i <= n; i++) {
		t = esc(parts[i])
		if (i % 2 == 0 && i < n) {
			out = out "\\fB" t "\\fR"
			continue
		}
		if (i % 2 == 0) # an unclosed ` is text
			t = "`" t
		t = emph(t, "\\*\\*[^*]+\\*\\*", 2, "B")
		t = emph(t, "\\*[^* ][^*]*\\*", 1, "I")
		out = out t
	}
	return out
}

function emph(s, re, k, font,    out) {
	out = ""
	while (match(s, re)) {
		out = out substr(s, 1, RSTART - 1) "\\f" font \
		      substr(s, RSTART + k, RLENGTH - 2 * k) "\\fR"
		s = substr(s, RSTART + RLENGTH)
	}
	return out s
}

# A text line as roff reads it: one starting with . or ' is not a request.
function text(s) {
	s = inline(s)
	if (s ~ /^[.']/)
		s = "\\&" s
	return s
}

function cells(line, arr,    n, i) {
	sub(/^[ \t]*\|/, "", line)
	sub(/\|[ \t]*$/, "", line)
	n = split(line, arr, "|")
	for (i = 1; i <= n; i++) {
		sub(/^[ \t]+/, "", arr[i])
		sub(/[ \t]+$/, "", arr[i])
	}
	return n
}

function flush_table(    i, j, n, c, fmt, a, row) {
	if (!nrows)
		return
	n = cells(rows[1], a)
	fmt = ""
	cells(rows[2], c)
	for (j = 1; j <= n; j++) # the last column takes the rest of the line
		fmt = fmt (j > 1 ? " " : "") (c[j] ~ /:$/ ? "r" : "l") \
		      (j == n ? "x" : "")
	print ".TS"
	print "tab(@);"
	print fmt "."
	row = ""
	for (j = 1; j <= n; j++)
		row = row (j > 1 ? "@" : "") "\\fB" inline(a[j]) "\\fR"
	print row
	print "_"
	for (i = 3; i <= nrows; i++) {
		cells(rows[i], a)
		row = ""
		for (j = 1; j <= n; j++) {
			c[j] = inline(a[j])
			if (j == n) # a text block: it wraps
				c[j] = "T{\n" c[j] "\nT}"
			row = row (j > 1 ? "@" : "") c[j]
		}
		print row
	}
	print ".TE"
	nrows = 0
}

# Close what is open before a new block starts.
function end_block() {
	flush_table()
	if (in_list) {
		print ".RE"
		in_list = 0
	}
}

BEGIN {
	print "'\\\" t"
	print ".\\\" " name "." section " -- generated from " source \
	      " by scripts/md2man.awk: edit that, not this."
	printf ".TH %s %s \"\" \"logengine %s\" \"%s\"\n", toupper(name),
	       section, version, section == 5 ? "File Formats" : "logengine"
	# Left-aligned, no hyphenation: field names and hex stay whole.
	print ".ad l"
	print ".nh"
	in_code = 0
	nrows = 0
	in_list = 0
	para = 0
}

in_code {
	if ($0 ~ /^```/) {
		print ".EE"
		in_code = 0
		next
	}
	s = esc($0)
	if (s ~ /^[.']/)
		s = "\\&" s
	print s
	next
}

/^```/ {
	end_block()
	print ".PP"
	print ".EX"
	in_code = 1
	next
}

/^# / {
	end_block()
	print ".SH NAME"
	print name " \\- " esc(substr($0, 3))
	print ".SH DESCRIPTION"
	para = 0
	next
}

/^## / {
	end_block()
	print ".SH " toupper(esc(substr($0, 4)))
	para = 0
	next
}

/^[ \t]*\|/ {
	if (in_list) {
		print ".RE"
		in_list = 0
	}
	rows[++nrows] = $0
	next
}

/^\* / {
	flush_table()
	if (!in_list) {
		print ".RS 2"
		in_list = 1
	}
	print ".IP \\(bu 2"
	print text(substr($0, 3))
	next
}

/^[ \t]*$/ {
	flush_table()
	para = 1
	next
}

in_list && /^  / {
	sub(/^[ \t]+/, "")
	print text($0)
	next
}

{
	end_block()
	if (para) {
		print ".PP"
		para = 0
	}
	print text($0)
}

END {
	end_block()
	print ".SH SEE ALSO"
	print ".BR logengine (1),"
	print ".BR logengine (3)"
}
