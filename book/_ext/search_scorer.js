// The site's search ranking (Sphinx's html_search_scorer, inlined before searchtools.js): Sphinx's own
// weights, and one change. A concept a learner searches ("delta rule", "衰减门") is taught in a chapter, while
// the API reference and the bibliography name it too (the API as an object, which Sphinx ranks first); the
// reference pages go below every chapter and front-matter page that also has the word.
var Scorer = {
  REFERENCE_PAGES: ["book/api", "book/references"],
  score: function (result) {
    var docname = result[0], score = result[4];
    return Scorer.REFERENCE_PAGES.indexOf(docname) > -1 ? score - 30 : score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
