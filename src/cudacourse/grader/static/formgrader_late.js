// cudacourse: late work marked in every formgrader list (Manage Submissions, Manual Grading,
// Students, a student's assignments and notebooks). nbgrader's lists show "3 / 3" whatever the
// lateness; this reads the course's own list of late submissions (/formgrader/cudacourse/late,
// from the gradebook) and puts a "late" label beside the score of each row whose link names a
// late submission. Rows are drawn by nbgrader's scripts after the page loads (and redrawn when
// a grade changes), so a MutationObserver marks them again; marking is idempotent. Every text
// goes in as textContent: student ids come from the gradebook, never as markup.
(function () {
    "use strict";
    // the server's base URL: what comes before /formgrader/ in this page's path (nbgrader's
    // base_url variable is not the same on every page)
    var here = location.pathname;
    var root = here.slice(0, Math.max(0, (here + "/").indexOf("/formgrader/")));
    var prefix = root + "/formgrader/";

    function parts(href) {
        var path = href.split(/[?#]/)[0];
        var at = path.indexOf(prefix);
        if (at < 0) return null;
        return path.slice(at + prefix.length).split("/").filter(Boolean).map(decodeURIComponent);
    }

    function label(text, title) {
        var span = document.createElement("span");
        span.className = "label label-warning cudacourse-late";
        span.textContent = text;
        span.title = title;
        span.style.marginLeft = "0.5em";
        return span;
    }

    function findings(late, href) {
        var p = parts(href);
        if (!p) return [];
        return late.filter(function (s) {
            if (p[0] === "submissions") return s.notebooks.indexOf(p[1]) >= 0;
            if (p[0] === "manage_students" && p.length === 3)
                return s.student === p[1] && s.assignment === p[2];
            if (p[0] === "manage_students" && p.length === 2) return s.student === p[1];
            if (p[0] === "gradebook" && p.length >= 2) return s.assignment === p[1];
            return false;
        });
    }

    function mark(late) {
        var rows = document.querySelectorAll("#main-table tr");
        rows.forEach(function (row) {
            if (row.querySelector(".cudacourse-late")) return;
            var found = [], whole = false;
            row.querySelectorAll("a[href]").forEach(function (a) {
                var p = parts(a.getAttribute("href")) || [];
                // an assignment's or a notebook's row (Manual Grading) sums its submissions
                whole = whole || p[0] === "gradebook";
                findings(late, a.getAttribute("href")).forEach(function (s) {
                    if (found.indexOf(s) < 0) found.push(s);
                });
            });
            if (!found.length) return;
            var cell = row.querySelector(".score, .avg-score") || row.lastElementChild;
            if (!cell) return;
            var text = (found.length === 1 && !whole) ? found[0].label
                : found.length + " late";
            var title = found.map(function (s) { return s.title; }).join("\n");
            cell.appendChild(label(text, title));
        });
    }

    function start(late) {
        var table = document.getElementById("main-table");
        if (!table || !late.length) return;
        mark(late);
        new MutationObserver(function () { mark(late); })
            .observe(table, {childList: true, subtree: true});
    }

    document.addEventListener("DOMContentLoaded", function () {
        fetch(root + "/formgrader/cudacourse/late", {credentials: "same-origin"})
            .then(function (r) { return r.ok ? r.json() : {late: []}; })
            .then(function (data) { start(data.late || []); })
            .catch(function () { /* no list: nbgrader's page as it is */ });
    });
})();
