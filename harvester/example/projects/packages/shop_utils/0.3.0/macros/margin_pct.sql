{#- Gross margin: (revenue - cost) as a percentage of revenue, one decimal; NULL without revenue. -#}
{% macro margin_pct(revenue, cost) -%}
    round(cast(({{ revenue }}) - ({{ cost }}) as double) / nullif({{ revenue }}, 0), 1)
{%- endmacro %}
