// Swagger UI theme JavaScript: it wraps SwaggerUIBundle to add one plugin, as the initializer's config has no hook for it.
(function () {
  'use strict';

  // The logo, the API's title and the published contract, not the stock box showing the URL of the UI's own copy.
  function topbar(system) {
    const h = system.React.createElement;
    return function Topbar() {
      const title = system.specSelectors.info().get('title') || document.title;
      return h('div', { className: 'topbar' },
        h('div', { className: 'wrapper' },
          h('div', { className: 'topbar-wrapper' },
            // @fastify/swagger-ui puts the configured logo into this link.
            h('a', { className: 'link' }),
            h('span', { className: 'docs-ui-title' }, title),
            h('nav', { className: 'docs-ui-contract' },
              h('a', { href: '../openapi.yaml' }, 'openapi.yaml'),
              h('a', { href: '../openapi.json' }, 'openapi.json')))));
    };
  }

  // Swagger UI shows JSON as JSON.stringify(JSON.parse(text)), rounding int64 ids past 2^53: those are kept as written.
  function exactJson(text) {
    const keepDigits = (_key, value, context) =>
      typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value) && context && context.source
        ? JSON.rawJSON(context.source)
        : value;
    return JSON.stringify(JSON.parse(text, keepDigits), null, '  ');
  }

  function responseBody(Original, system) {
    const h = system.React.createElement;
    // JSON.rawJSON and the reviver's source text are recent (Chrome 114, Firefox 135, Safari 18.4).
    const exact = typeof JSON.rawJSON === 'function';
    return function ExactResponseBody(props) {
      const { content, contentType, getComponent } = props;
      if (!exact || typeof content !== 'string' || !/json/i.test(contentType || '')) return h(Original, props);
      let pretty;
      try {
        pretty = exactJson(content);
      } catch {
        return h(Original, props);
      }
      const HighlightCode = getComponent('HighlightCode', true);
      return h('div', null,
        h('h5', null, 'Response body'),
        h(HighlightCode, { language: 'json', downloadable: true, fileName: 'response_' + Date.now() + '.json', canCopy: true }, pretty));
    };
  }

  function docsUi(system) {
    return {
      // InfoUrl would link the UI's own copy of the spec under the title; the top bar links the contract.
      components: { Topbar: topbar(system), InfoUrl: () => null },
      wrapComponents: { responseBody },
    };
  }

  const original = window.SwaggerUIBundle;
  window.SwaggerUIBundle = Object.assign(
    (config) => original({ ...config, plugins: [...(config.plugins || []), docsUi] }),
    original,
  );
})();
