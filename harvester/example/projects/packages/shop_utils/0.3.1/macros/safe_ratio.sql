{#- numerator / denominator as a decimal rounded to 4 places; NULL when the denominator is 0 or NULL. -#}
{% macro safe_ratio(numerator, denominator) -%}
    case
        when ({{ denominator }}) is null or ({{ denominator }}) = 0 then null
        else round(cast({{ numerator }} as double) / ({{ denominator }}), 4)
    end
{%- endmacro %}
