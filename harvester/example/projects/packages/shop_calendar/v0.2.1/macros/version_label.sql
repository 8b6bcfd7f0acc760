{#- The version of shop_calendar this macro ships in, as a SQL string literal. -#}
{% macro version_label() -%}
    '0.2.1'
{%- endmacro %}
